"""How jobs, attempts, nodes and metrics look in a terminal.

Jobs, attempts and metric points come as the API's JSON (dicts): `ls`, `show` and `logs` read them
without the spec models where they can (:mod:`trainyard.cli.reading`), and the full SDK's models
are dumped to the same JSON, so both ways print the same table."""

from __future__ import annotations

from typing import TYPE_CHECKING

import time
from collections import OrderedDict

from rich.console import Group

if TYPE_CHECKING:
    from trainyard.cli.safe_text import Table
    from rich.text import Text
    from trainyard.spec.records import NodeInfo


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
    """How long from ``start`` to ``end`` (or now), to the second that matters: 9.4s, 4m05s, 3h07m, 2d04h."""
    if start is None:
        return "-"
    d = max(0.0, (end or time.time()) - start)
    if d < 60:
        return f"{d:.1f}s"
    s = int(d)
    big, small, first, second = next(u for u in ((86400, 3600, "d", "h"), (3600, 60, "h", "m"), (60, 1, "m", "s"))
                                     if s >= u[0])
    return f"{s // big}{first}{s % big // small:02d}{second}"


def job_time(job: dict) -> str:
    """How long the job has taken, as ``duration`` says it: from its first attempt's start to its end, its retries and
    the waits between them counted (what one waits for, as kubectl says of a Job); so far while it has not ended; -
    before any attempt started. The web UI's jobs list says the same (ui/static/jobparts.js, jobTime); each attempt's
    own time is in ``show``'s attempts table."""
    from trainyard.status import JobStatus

    attempts = job.get("attempts") or []
    started = [a["started_at"] for a in attempts if a.get("started_at") is not None]
    if not started:
        return "-"
    ends = [t for a in attempts if (t := a.get("ended_at") or a.get("started_at")) is not None]
    return duration(min(started), max(ends) if JobStatus(job["status"]).is_terminal() else None)


def resources(job: dict) -> str:
    from trainyard.spec.units import format_memory

    r = job["spec"]["resources"]
    parts = [f"{r['cpu']:g} cpu"]
    if r.get("memory"):
        parts.append(format_memory(r["memory"]))
    if r.get("gpu"):
        types = r.get("gpu_type") or []
        parts.append(f"{r['gpu']} × {' or '.join([types] if isinstance(types, str) else types) or 'GPU'}")
    return ", ".join(parts)


def command(spec: dict) -> str:
    """The command as it runs, ``{{params.x}}`` put in (``JobSpec.argv()`` without its shell)."""
    from trainyard.spec.params import command_with

    command = command_with(spec["command"], spec.get("params") or {})
    return command if isinstance(command, str) else " ".join(command)


def jobs_table(jobs: list[dict], show_labels: bool = False) -> Table:
    """``show_labels``: a LABELS column (``k=v,k=v``, as ``kubectl get --show-labels`` prints them)."""
    from trainyard.cli.safe_text import Table

    table = Table(box=None, header_style="bold")
    for col in ("ID", "NAME", "STATUS", "RESOURCES", "ATTEMPTS", "SUBMITTED", "TIME", "REASON",
                *(["LABELS"] if show_labels else [])):
        # an id is copied into the next command: never cut (no_wrap keeps it out of rich's shrinking)
        table.add_column(col, overflow="fold" if col in ("REASON", "LABELS") else "ellipsis", no_wrap=col == "ID")
    for j in jobs:
        labels = [",".join(f"{k}={v}" for k, v in (j["spec"].get("labels") or {}).items()) or "-"] if show_labels \
            else []
        table.add_row(j["id"], j["name"], status_text(j["status"]), resources(j), str(len(j["attempts"])),
                      ago(j["created_at"]), job_time(j), j.get("reason") or "", *labels)
    return table


def job_detail(job: dict) -> Group:
    from trainyard.cli.safe_text import Table

    pending = job["status"] == "pending"
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("job", f"{job['id']}  ({job['name']})")
    head.add_row("status", status_text(job["status"]))
    reason = job.get("reason") or ""
    if reason and reason.lower() != job["status"].lower():  # a succeeded job's 'succeeded' repeats the status
        head.add_row("pending because" if pending else "reason", reason)
    if pending and job.get("position") is not None:
        n = job["position"]
        head.add_row("position", f"{n} job{'s' if n != 1 else ''} ahead in queue {job['queue']}")
    head.add_row("queue", f"{job['queue']}, priority {job['priority']}")
    head.add_row("resources", resources(job))
    if labels := job["spec"].get("labels"):
        head.add_row("labels", ", ".join(f"{k}={v}" for k, v in labels.items()))
    head.add_row("command", command(job["spec"]))
    head.add_row("submitted", ago(job["created_at"]))
    if (took := job_time(job)) != "-":
        head.add_row("time", took)
    parts: list = [head]
    if job["attempts"]:
        parts.append(_attempts_table(job["attempts"]))
    return Group(*parts)


def _attempts_table(attempts: list[dict]) -> Table:
    from trainyard.cli.safe_text import Table

    table = Table(title="attempts", box=None, header_style="bold", title_justify="left")
    for col in ("#", "STATUS", "NODE", "GPUS", "EXIT", "REASON", "DURATION", "MESSAGE"):
        table.add_column(col)
    for a in attempts:
        note = a.get("message") or ""
        if a.get("preempted_by"):
            note = f"preempted for job {a['preempted_by']}" + (f"; {note}" if note else "")
        if a.get("borrowed"):
            note = "on borrowed capacity" + (f"; {note}" if note else "")
        table.add_row(str(a["number"]), status_text(a["status"]), a.get("node") or "-", _gpus(a),
                      _exit(a), a.get("reason") or "-", duration(a.get("started_at"), a.get("ended_at")), note[:120])
        replicas = a.get("replicas") or []
        if len(replicas) > 1:
            for r in replicas:
                table.add_row(f"  r{r['index']}", status_text(r["status"]), r["node"], _gpus(r), _exit(r),
                              r.get("reason") or "-", duration(r.get("started_at"), r.get("ended_at")),
                              (r.get("message") or "")[:120])
    return table


def _gpus(a: dict) -> str:
    return ",".join(a.get("gpus") or []) or "-"


def _exit(a: dict) -> str:
    return "-" if a.get("exit_code") is None else str(a["exit_code"])


def nodes_table(nodes: list[NodeInfo]) -> Table:
    from trainyard.cli.safe_text import Table
    from trainyard.spec.units import format_memory

    table = Table(box=None, header_style="bold")
    cordoned = any(n.cordon for n in nodes)
    for col in ("NODE", "STATE", "CPU (used/total)", "MEMORY (used/total)", "MEMORY LIMIT", "GPUS (used/total)",
                "GPU TYPE", "LABELS") + (("WHY",) if cordoned else ()):
        table.add_column(col)
    for n in nodes:
        labels = ",".join(f"{k}={v}" for k, v in n.labels.items()) or "-"
        why = ((n.cordon.reason or "-") + (f" ({n.cordon.by})" if n.cordon.by else ""),) if n.cordon else ("",)
        table.add_row(n.name, node_state(n), f"{n.cpu_used:g}/{n.cpu:g}",
                      f"{format_memory(n.memory_used)}/{format_memory(n.memory)}", n.memory_enforcement,
                      f"{len(n.gpus_used)}/{n.gpu}", n.gpu_type or "-", labels, *(why if cordoned else ()))
    return table


def node_state(n: NodeInfo) -> str:
    """ready; cordoned; draining (a drain's attempts still stopping); drained."""
    if n.cordon is None:
        return "ready"
    if n.cordon.drained_at is None:
        return "cordoned"
    return f"draining ({n.attempts})" if n.attempts else "drained"


def metrics_table(points: list[dict]) -> Table:
    from trainyard.cli.safe_text import Table

    series: "OrderedDict[str, list[float]]" = OrderedDict()
    for p in points:
        series.setdefault(p["name"], []).append(p["value"])
    table = Table(title="metrics", box=None, header_style="bold", title_justify="left")
    for col in ("METRIC", "LAST", "MIN", "MAX", "STEPS"):
        table.add_column(col)
    for name, values in series.items():
        table.add_row(name, f"{values[-1]:.6g}", f"{min(values):.6g}", f"{max(values):.6g}", str(len(values)))
    return table
