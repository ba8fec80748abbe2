"""`trainyard stack JOB` (where a running job's Python processes are, every thread, as py-spy dumps them) and
`trainyard exec JOB -- CMD` (a command run beside the job's, on its node)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from trainyard.cli.common import WAIT_MAX, Output, client, console, err_console, handled
from trainyard.cli.completion import job_ids


def stack(
    job_id: Annotated[str, typer.Argument(help="job id, or name (the newest job of that name)",
                                            autocompletion=job_ids)],
    replica: Annotated[Optional[int], typer.Option("--replica", "-r", min=0, help="only this replica")] = None,
    with_locals: Annotated[bool, typer.Option("--locals", help="each frame's local variables too")] = False,
    native: Annotated[bool, typer.Option("--native", help="C and C++ frames too (inside NCCL, CUDA…)")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, max=WAIT_MAX,
                                           help="seconds to wait for the answers (exit 124 after)")] = 30.0,
    output: Annotated[Output, typer.Option("--output", "-o", help="table (the dumps as text) or json")] = Output.table,
) -> None:
    """Dump the Python stacks of a running job's command, every replica's (or --replica's), each thread's:
    where a hung or slow job is. Its launcher runs py-spy on the node; the answer comes within ~3 s. Exit 1
    if a replica could not be dumped."""
    from trainyard.sdk.replica_requests import dump
    from trainyard.spec.stacks import StackDump

    bad = 0

    def show(d: StackDump) -> None:
        nonlocal bad
        bad += d.status != "done"
        if output is Output.json:
            return
        console.print(f"[bold]replica {d.replica}[/bold] on {d.node or '?'} ({d.attempt_id})", highlight=False)
        if d.text:
            console.print(d.text, markup=False, highlight=False, soft_wrap=True)
        if d.error or d.status == "expired":
            why = d.error or "no answer from its launcher: the replica ended, or its launcher predates `stack`"
            err_console.print(f"[red]replica {d.replica}:[/red] {why}", highlight=False)
        console.print()

    from trainyard.cli.job_ref import job_id_of

    with handled():
        c = client()
        job_id = job_id_of(job_id)
        with console.status(f"asking {job_id}'s launchers…", spinner="dots"):  # prints go above it
            dumps = dump(c.http, job_id, replica, timeout, on_answer=show, with_locals=with_locals, native=native)
    if output is Output.json:
        console.print_json(data=[d.model_dump(mode="json") for d in dumps])
    if bad:
        raise typer.Exit(1)


def exec_(
    job_id: Annotated[str, typer.Argument(help="job id, or name (the newest job of that name)",
                                            autocompletion=job_ids)],
    command: Annotated[list[str], typer.Argument(help="after --, the command and its arguments", show_default=False)],
    replica: Annotated[int, typer.Option("--replica", "-r", min=0, help="the replica to run it beside")] = 0,
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, max=600.0,
                                           help="seconds it may run; then it is stopped")] = 30.0,
) -> None:
    """Run a command beside a running job's, on its node: in its work dir, with its environment, as its account,
    in its container. Its output is printed, and its exit code is this one's (1 if it could not run, 124 if
    the launcher never answered). No shell, no input: `-- sh -c '...'` for pipes."""
    import sys

    from trainyard.sdk.replica_requests import execute

    from trainyard.cli.job_ref import job_id_of

    with handled():
        c = client()
        job_id = job_id_of(job_id)
        with console.status(f"running on {job_id}…", spinner="dots"):
            got = execute(c.http, job_id, command, replica, timeout)
    from trainyard.cli.safe_text import escape, for_terminal

    sys.stdout.write(for_terminal(got.output) if sys.stdout.isatty() else got.output)
    sys.stdout.flush()
    if got.status == "done":
        raise typer.Exit(got.exit_code if 0 <= got.exit_code < 256 else 128 + (-got.exit_code % 128))
    err_console.print(f"[red]error:[/red] {escape(got.error or 'no answer from its launcher: the replica ended')}",
                      highlight=False)
    raise typer.Exit(1)
