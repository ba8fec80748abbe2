"""The consoles, plain writes and the log printer, without typer: shared by the full CLI
(:mod:`trainyard.cli.common`, :mod:`trainyard.cli.jobs`) and the quick ``run --follow`` path
(:mod:`trainyard.cli.entry`), so both print the same bytes."""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import Console

PIPE_WIDTH = 400  # columns of a table written to a pipe or a file

console = Console()
if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
    # whole rows, one a line, as kubectl's and docker's tables are (grep, awk, a file); rich would fold them at 80
    console.width = PIPE_WIDTH
err_console = Console(stderr=True, soft_wrap=True)  # never wrap: errors are grepped and copied


def write(text: str) -> None:
    if sys.stdout is None:  # started with its output closed (`>&-`): said as coreutils say it, no traceback
        err_console.print("[red]error:[/red] cannot write: standard output is closed", highlight=False)
        raise SystemExit(1)
    sys.stdout.write(text)
    sys.stdout.flush()


def _shown() -> Any:
    """How a job's output is written here: to a terminal, without what would make it act (cli/safe_text.py)."""
    if sys.stdout is None or not sys.stdout.isatty():
        return lambda text: text
    from trainyard.cli.safe_text import for_terminal

    return for_terminal


class LogPrinter:
    """Writes log chunks; for gangs, whole lines prefixed ``[rN]`` (chunks of replicas interleave).

    A chunk is anything with ``replica`` and ``data`` (an SDK ``LogChunk`` or the quick path's own)."""

    def __init__(self, prefix: bool) -> None:
        self.prefix = prefix
        self.partial: dict[int, str] = {}
        self.shown = _shown()

    def add(self, chunk: Any) -> None:
        if not self.prefix:
            write(self.shown(chunk.data))
            return
        text = self.partial.pop(chunk.replica, "") + self.shown(chunk.data)
        *lines, rest = text.split("\n")
        if rest:
            self.partial[chunk.replica] = rest
        write("".join(f"[r{chunk.replica}] {line}\n" for line in lines))

    def flush(self) -> None:
        for replica, rest in sorted(self.partial.items()):
            write(f"[r{replica}] {rest}\n")
        self.partial.clear()
