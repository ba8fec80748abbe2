"""`trainyard queue …`: define queues with quotas, list them with what they use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from trainyard.cli.common import Output, as_flags, client, console, handled, write
from trainyard.cli.toplevel import SuggestingGroup
from trainyard.errors import InvalidSpec

if TYPE_CHECKING:
    from trainyard.spec.queue import QueueSpec
    from trainyard.spec.records import QueueInfo

app = typer.Typer(no_args_is_help=True, cls=SuggestingGroup, help="Queues: a team's line of jobs, with a priority and quotas.")
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]
# the fields queue create's options fill, and the flag that sets each: a bad one is said as the flag
QUEUE_FLAGS = {"name": "NAME", "quota.cpu": "--cpu", "quota.memory": "--memory", "quota.gpu": "--gpu",
               "quota.jobs": "--jobs", "borrowing": "--no-borrowing", "max_priority": "--max-priority"}


@app.command()
def create(
    name: Annotated[Optional[str], typer.Argument(help="queue name (or give -f FILE)")] = None,
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="YAML with one queue or `queues: [...]`")] = None,
    team: Annotated[Optional[str], typer.Option(help="owning team, for fair share (default: the name)")] = None,
    priority: Annotated[str, typer.Option(help="an integer or low/normal/high/urgent")] = "0",
    max_priority: Annotated[Optional[str], typer.Option(
        "--max-priority", help="the highest priority a non-admin's job on it may have, an integer or "
        "low/normal/high/urgent (default: normal); an admin's to set")] = None,
    cpu: Annotated[Optional[str], typer.Option(help="quota: cores, e.g. 64 or 500m")] = None,
    memory: Annotated[Optional[str], typer.Option(help="quota: memory, e.g. 256Gi")] = None,
    gpu: Annotated[Optional[list[str]], typer.Option(help="quota: GPUs as TYPE=N (repeatable) or N for all types")] = None,
    jobs: Annotated[Optional[int], typer.Option(help="quota: running jobs")] = None,
    no_borrowing: Annotated[bool, typer.Option("--no-borrowing", help="never use idle capacity beyond the quota")] = False,
    replace: Annotated[bool, typer.Option("--replace", help="change the queue if it exists")] = False,
) -> None:
    """Create a queue (or several, from a file)."""
    from trainyard.spec.queue import load_queues

    with handled():
        if file is not None:
            specs = load_queues(file)
        elif name is not None:
            specs = [_from_options(name, team, priority, cpu, memory, gpu or [], jobs, not no_borrowing,
                                   max_priority)]
        else:
            raise InvalidSpec("give a NAME or -f FILE")
        c = client()
        for spec in specs:
            info = c.create_queue(spec, replace=replace)
            console.print(f"queue [bold]{info.queue.name}[/bold] created ({quota_text(info.queue)})", highlight=False)


def _from_options(name: str, team: str | None, priority: str, cpu: str | None, memory: str | None,
                  gpu: list[str], jobs: int | None, borrowing: bool, max_priority: str | None = None) -> QueueSpec:
    from trainyard.spec.queue import QueueSpec
    from pydantic import ValidationError
    from trainyard.spec.lines import validation_errors

    gpus: dict[str, int] | None = None
    for item in gpu:
        kind, _, n = item.rpartition("=")
        if not n.isdigit():
            raise InvalidSpec.flag("--gpu", f"{item!r}: write TYPE=N (e.g. A100=4) or N")
        gpus = (gpus or {}) | {kind or "*": int(n)}
    quota = {k: v for k, v in {"cpu": cpu, "memory": memory, "gpu": gpus, "jobs": jobs}.items() if v is not None}
    raw = {"name": name, "priority": priority_arg(priority), "quota": quota, "borrowing": borrowing}
    if max_priority is not None:
        raw["max_priority"] = priority_arg(max_priority)
    if team:
        raw["team"] = team
    try:
        return QueueSpec.model_validate(raw)
    except ValidationError as e:
        raise as_flags(InvalidSpec(errors=validation_errors(e, {}, "")), QUEUE_FLAGS) from None


def priority_arg(text: str) -> int | str:
    """A --priority flag's value: ``150`` the integer (as in YAML), a class name as it is."""
    return int(text) if text.lstrip("-").isdigit() else text


def max_priority_text(q: QueueSpec) -> str:
    """The highest priority a non-admin's job on ``q`` may have, and whether it is the default."""
    from trainyard.spec.job import PRIORITY_CLASSES, priority_text

    if q.max_priority is None:
        return f"{priority_text(PRIORITY_CLASSES['normal'])}, the default"
    return priority_text(q.max_priority)


@app.command("ls")
def ls(output: OutputOpt = Output.table) -> None:
    """Queues with their quotas, what their running jobs hold, and how many jobs wait."""
    from trainyard.cli.listing import said_empty
    from trainyard.cli.safe_text import Table

    with handled():
        infos = client().queues()
        if output == Output.json:
            write(json.dumps([q.model_dump(mode="json") for q in infos], indent=2) + "\n")
            return
        if said_empty(infos, "queues defined", hint="jobs go to queue default; define one: trainyard queue create"):
            return
        table = Table(box=None, header_style="bold")
        for col in ("QUEUE", "TEAM", "PRIORITY", "MAX JOB PRIORITY", "RUNNING", "PENDING", "IN USE / QUOTA",
                    "BORROWING"):
            table.add_column(col)
        for q in infos:
            top = "100 (default)" if q.queue.max_priority is None else str(q.queue.max_priority)
            table.add_row(q.queue.name, q.queue.team, str(q.queue.priority), top, str(q.usage.running),
                          str(q.pending), usage_text(q), "yes" if q.queue.borrowing else "no")
        console.print(table)


@app.command()
def show(name: str, output: OutputOpt = Output.table) -> None:
    """One queue: quota, usage, waiting jobs."""
    from trainyard.cli.safe_text import Table

    with handled():
        c = client()
        q = c.queue(name)
        if output == Output.json:
            write(q.model_dump_json(indent=2) + "\n")
            return
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_row("queue", f"{q.queue.name}  (team {q.queue.team}, priority {q.queue.priority})")
        grid.add_row("quota", quota_text(q.queue))
        grid.add_row("max job priority", f"{max_priority_text(q.queue)}, for jobs of anyone but an admin")
        grid.add_row("in use", usage_text(q, held=True))
        grid.add_row("jobs", f"{q.usage.running} running ({q.usage.borrowed} on borrowed capacity), {q.pending} pending")
        grid.add_row("borrowing", "allowed" if q.queue.borrowing else "off")
        console.print(grid)


@app.command()
def delete(name: str) -> None:
    """Delete a queue; its jobs keep running, new jobs naming it are refused."""
    with handled():
        client().delete_queue(name)
        console.print(f"queue {name} deleted")


def quota_text(q: QueueSpec) -> str:
    from trainyard.spec.units import format_memory

    parts = []
    if q.quota.cpu is not None:
        parts.append(f"{q.quota.cpu:g} cpu")
    if q.quota.memory is not None:
        parts.append(format_memory(q.quota.memory))
    for kind, n in (q.quota.gpu or {}).items():
        parts.append(f"{n} × {'GPU' if kind == '*' else kind}")
    if q.quota.jobs is not None:
        parts.append(f"{q.quota.jobs} jobs")
    return ", ".join(parts) or "no quota"


def usage_text(info: QueueInfo, held: bool = False) -> str:
    """What the queue's running jobs hold against each limit of its quota (``1/3 jobs``, ``2/4 A100``), or ``no
    quota``; with ``held``, also what they hold that the quota leaves unlimited (``2 cpu``), or ``nothing``. A
    limit is never written as ∞: ``0/∞ cpu`` read as a cpu quota on a queue that counts only jobs."""
    from trainyard.spec.units import format_memory

    u, quota = info.usage, info.queue.quota
    gpus = quota.gpu or {}
    parts = []
    if quota.cpu is not None or (held and u.cpu):
        parts.append(f"{u.cpu:g}{'' if quota.cpu is None else f'/{quota.cpu:g}'} cpu")
    if quota.memory is not None or (held and u.memory):
        limit = "" if quota.memory is None else f"/{format_memory(quota.memory)}"
        parts.append(f"{format_memory(u.memory)}{limit}")
    for kind in dict.fromkeys([*gpus, *(u.gpu if held else ())]):
        used = sum(u.gpu.values()) if kind == "*" else u.gpu.get(kind, 0)
        parts.append(f"{used}{'' if kind not in gpus else f'/{gpus[kind]}'} {'GPU' if kind == '*' else kind}")
    if quota.jobs is not None:
        parts.append(f"{u.running}/{quota.jobs} jobs")
    return ", ".join(parts) or ("nothing" if held else "no quota")
