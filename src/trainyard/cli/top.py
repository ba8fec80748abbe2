"""`trainyard top`: nodes and active jobs, redrawn every few seconds until q or Ctrl-C."""

from __future__ import annotations

import os
import select
import sys
import time
from contextlib import contextmanager
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group

from trainyard.cli.common import client, console, handled
from trainyard.cli.render import duration, status_text

if TYPE_CHECKING:
    from trainyard.cli.safe_text import Table
    from rich.text import Text
    from trainyard.spec.records import JobInfo, NodeInfo

ACTIVE = ["starting", "running", "cancelling"]


def top(
    interval: Annotated[float, typer.Option("--interval", "-i", min=0.5, max=3600,
                                            help="seconds between refreshes")] = 2.0,
) -> None:
    """A live view of nodes (what is allocated of each) and of running and pending jobs. Quit with q or Ctrl-C.
    With its output not a terminal (`trainyard top | less`, a script) it prints the view once and exits."""
    from rich.live import Live

    with handled():
        c = client()
        if not console.is_terminal:  # a live view redraws in place: to a pipe or a file it would print nothing
            console.print(_view(c, live=False))
            return
        with Live(_view(c), console=console, screen=False, auto_refresh=False) as live, _keys() as key:
            while True:
                deadline = time.monotonic() + interval
                while (left := deadline - time.monotonic()) > 0:
                    if key(left) in ("q", "Q"):
                        return
                live.update(_view(c), refresh=True)


@contextmanager
def _keys() -> Iterator:
    """A function that waits up to N seconds for a key press and returns it (None if none came).
    The terminal is in cbreak mode meanwhile, so a key needs no Enter; without a terminal it only sleeps."""
    fd = sys.stdin.fileno() if sys.stdin and not sys.stdin.closed else -1
    if fd < 0 or not os.isatty(fd):
        yield lambda wait: time.sleep(wait)
        return
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        def key(wait: float) -> str | None:
            ready, _, _ = select.select([fd], [], [], wait)
            return os.read(fd, 1).decode(errors="replace") if ready else None

        yield key
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _view(c, live: bool = True) -> Group:  # noqa: ANN001
    from rich.text import Text

    nodes = c.nodes()
    active = c.jobs(status=ACTIVE, limit=100).items
    pending = c.jobs(status=["pending"], limit=20)
    title = Text.assemble(("trainyard top", "bold"), f"  {c.server}  {time.strftime('%H:%M:%S')}  ",
                          f"{len(active)} active, {len(pending.items)}{'+' if pending.next_cursor else ''} pending",
                          "   (q to quit)" if live else "")
    return Group(title, _nodes(nodes), _jobs(active, pending.items))


def _nodes(nodes: list[NodeInfo]) -> Table:
    from trainyard.cli.safe_text import Table
    from rich.text import Text

    from trainyard.cli.render import node_state
    from trainyard.spec.units import format_memory

    t = Table(title="nodes", title_justify="left", expand=False)
    for col in ("node", "cpu", "memory", "gpu", "gpu type"):
        t.add_column(col)
    for n in nodes:
        # a cordoned node's name says so: its free room is not room anyone will get
        t.add_row(n.name if n.cordon is None else Text.assemble(n.name, (f" ({node_state(n)})", "yellow")), _bar(n.cpu_used, n.cpu, f"{n.cpu_used:g}/{n.cpu:g}"),
                  _bar(n.memory_used, n.memory, f"{format_memory(n.memory_used)}/{format_memory(n.memory)}"),
                  _bar(len(n.gpus_used), n.gpu, f"{len(n.gpus_used)}/{n.gpu}"), n.gpu_type or "-")
    return t


def _bar(used: float, total: float, label: str, width: int = 10) -> Text:
    from rich.text import Text

    filled = round(width * used / total) if total else 0
    style = "red" if total and used >= total else "green"
    return Text.assemble(("█" * filled, style), ("░" * (width - filled), "dim"), f" {label}")


def _jobs(active: list[JobInfo], pending: list[JobInfo]) -> Table:
    from trainyard.cli.safe_text import Table
    from trainyard.spec.units import format_memory

    t = Table(title="jobs", title_justify="left")
    for col in ("id", "name", "status", "queue", "node", "gpus", "cpu", "memory", "running for / why waiting"):
        t.add_column(col, overflow="fold" if col.startswith("running") else "ellipsis")
    for j in [*active, *pending]:
        last = j.last_attempt
        r = j.spec.resources
        n = j.spec.replicas
        when = duration(last.started_at, None) if last and j.status.value != "pending" else (j.reason or "")
        t.add_row(j.id, j.name, status_text(j.status.value), j.queue,
                  (last.node or "-") if last and j.status.value != "pending" else "-",
                  ",".join(last.gpus) if last and last.gpus else str(r.gpu * n),
                  f"{r.cpu * n:g}", format_memory(r.memory * n if r.memory else None), when)
    return t
