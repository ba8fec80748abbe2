"""How jobs, attempts, nodes and metrics look in a terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

import time
from collections import OrderedDict

from rich.console import Group

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text
    from trainyard.spec.records import JobInfo, MetricPoint, NodeInfo


STATUS_STYLE = {
    "pending": "yellow", "starting": "cyan", "running": "blue", "cancelling": "magenta",
    "succeeded": "green", "failed": "red", "cancelled": "dim",
}


def status_text(status: str) -> Text:
    from rich.text import Text

    return Text(status, style=STATUS_STYLE.get(status, ""))


def ago(ts: float | None) -> str:
    if ts is None:
        return "-"
    d = max(0.0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if d >= size:
            return f"{d / size:.0f}{unit} ago"
    return f"{d:.0f}s ago"


def duration(start: float | None, end: float | None) -> str:
    if start is None:
        return "-"
    return f"{(end or time.time()) - start:.1f}s"


def resources(job: JobInfo) -> str:
    from trainyard.spec.units import format_memory

    r = job.spec.resources
    parts = [f"{r.cpu:g} cpu"]
    if r.memory:
        parts.append(format_memory(r.memory))
    if r.gpu:
        parts.append(f"{r.gpu} × {' or '.join(r.gpu_types) or 'GPU'}")
    return ", ".join(parts)


def jobs_table(jobs: list[JobInfo]) -> Table:
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for col in ("ID", "NAME", "STATUS", "RESOURCES", "ATTEMPTS", "SUBMITTED", "REASON"):
        table.add_column(col, overflow="fold" if col == "REASON" else "ellipsis")
    for j in jobs:
        table.add_row(j.id, j.name, status_text(j.status.value), resources(j), str(len(j.attempts)),
                      ago(j.created_at), j.reason or "")
    return table


def job_detail(job: JobInfo) -> Group:
    from rich.table import Table

    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("job", f"{job.id}  ({job.name})")
    head.add_row("status", status_text(job.status.value))
    if job.reason:
        head.add_row("pending because" if job.status.value == "pending" else "reason", job.reason)
    if job.status.value == "pending" and job.position is not None:
        head.add_row("position", f"{job.position} job{'s' if job.position != 1 else ''} ahead in queue {job.queue}")
    head.add_row("queue", f"{job.queue}, priority {job.priority}")
    head.add_row("resources", resources(job))
    head.add_row("command", " ".join(job.spec.argv()[2:] if isinstance(job.spec.command, str) else job.spec.argv()))
    head.add_row("submitted", ago(job.created_at))
    parts: list = [head]
    if job.attempts:
        table = Table(title="attempts", box=None, header_style="bold", title_justify="left")
        for col in ("#", "STATUS", "NODE", "GPUS", "EXIT", "REASON", "DURATION", "MESSAGE"):
            table.add_column(col)
        for a in job.attempts:
            note = a.message or ""
            if a.preempted_by:
                note = f"preempted for job {a.preempted_by}" + (f"; {note}" if note else "")
            if a.borrowed:
                note = "on borrowed capacity" + (f"; {note}" if note else "")
            table.add_row(str(a.number), status_text(a.status.value), a.node or "-", ",".join(a.gpus) or "-",
                          "-" if a.exit_code is None else str(a.exit_code), a.reason or "-",
                          duration(a.started_at, a.ended_at), note[:120])
            if len(a.replicas) > 1:
                for r in a.replicas:
                    table.add_row(f"  r{r.index}", status_text(r.status.value), r.node, ",".join(r.gpus) or "-",
                                  "-" if r.exit_code is None else str(r.exit_code), r.reason or "-",
                                  duration(r.started_at, r.ended_at), (r.message or "")[:120])
        parts.append(table)
    return Group(*parts)


def nodes_table(nodes: list[NodeInfo]) -> Table:
    from rich.table import Table
    from trainyard.spec.units import format_memory

    table = Table(box=None, header_style="bold")
    for col in ("NODE", "CPU (used/total)", "MEMORY (used/total)", "MEMORY LIMIT", "GPUS (used/total)", "GPU TYPE",
                "LABELS"):
        table.add_column(col)
    for n in nodes:
        labels = ",".join(f"{k}={v}" for k, v in n.labels.items()) or "-"
        table.add_row(n.name, f"{n.cpu_used:g}/{n.cpu:g}", f"{format_memory(n.memory_used)}/{format_memory(n.memory)}",
                      n.memory_enforcement, f"{len(n.gpus_used)}/{n.gpu}", n.gpu_type or "-", labels)
    return table


def metrics_table(points: list[MetricPoint]) -> Table:
    from rich.table import Table

    series: "OrderedDict[str, list[MetricPoint]]" = OrderedDict()
    for p in points:
        series.setdefault(p.name, []).append(p)
    table = Table(title="metrics", box=None, header_style="bold", title_justify="left")
    for col in ("METRIC", "LAST", "MIN", "MAX", "STEPS"):
        table.add_column(col)
    for name, ps in series.items():
        values = [p.value for p in ps]
        table.add_row(name, f"{values[-1]:.6g}", f"{min(values):.6g}", f"{max(values):.6g}", str(len(ps)))
    return table
