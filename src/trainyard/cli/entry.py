"""The ``trainyard`` command's entry point: ``trainyard run SPEC.yaml --wait`` or ``--follow`` the quick
way, else the CLI.

Building the CLI (typer) and the full SDK (httpx, pydantic) costs several times what a short job
takes, and so does tearing them down at exit; a plain ``run SPEC.yaml --wait`` or ``--follow`` whose
spec the server can take as it is goes through :mod:`trainyard.sdk.quick` instead, printing what the
full command prints (``--follow`` with the full command's own consoles and log printer, from
:mod:`trainyard.cli.output`). Whatever that path declines (other arguments, a spec with files to
prepare, no server up yet, a refusal) is the full command's, and nothing was submitted by then.

The quick way, the read commands, ``--help`` and ``--version`` leave without the interpreter's teardown
(:func:`leave`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import NoReturn

from trainyard import startup
from trainyard.cli.ended import ending

WAIT_FLAGS = ("--wait", "-w")
FOLLOW_FLAGS = ("--follow", "-f")


# commands that write to stdout and stderr alone: what they leave behind is nothing but memory
NO_TEARDOWN = frozenset({"ls", "show", "logs", "--help", "--version"})


def main() -> None:
    code = quick(sys.argv[1:])
    if code is not None:
        leave(code)  # its output, too, is stdout and stderr alone
    try:
        if sys.argv[1:2] == ["server"]:  # a service manager's SIGTERM is answered from here on, not only once serving
            startup.guard()  # in the try: a signal may come while guard() is still installing its handlers
        from trainyard.cli.main import app

        app(prog_name="trainyard")
    except startup.StoppedStarting as e:  # before the server held anything (trainyard.server.serve undoes the rest)
        startup.stopped(e)
    except SystemExit as e:
        if sys.argv[1:2] and sys.argv[1] in NO_TEARDOWN:
            leave(e.code)
        raise


def leave(code: object) -> NoReturn:
    """Exit with ``code`` as the interpreter would, without its teardown.

    Once typer, pydantic and rich are loaded, tearing the interpreter down (every module's objects
    freed one by one) takes 25-35 ms of a read command's ~170 ms, to give back memory the OS takes
    back at once. What the teardown does that counts is done here, in its order: other threads are
    waited for (here: none, or the interpreter exits as usual), atexit's functions run, stdout and
    stderr are flushed. A flush that fails (a closed pipe) goes the usual way, which says so as it
    always did. Only for :data:`NO_TEARDOWN`: their files are stdout and stderr alone.
    """
    import atexit
    import os
    import threading

    if threading.active_count() > 1 or not (code is None or isinstance(code, int)):
        sys.exit(code)
    atexit._run_exitfuncs()  # the interpreter's own step, public in all but name; it clears what it ran
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        sys.exit(code)
    os._exit(code or 0)


def quick(argv: list[str]) -> int | None:
    """The exit code of ``run SPEC.yaml --wait`` (or ``--follow``) done the quick way; None when it is
    the full CLI's."""
    if len(argv) != 3 or argv[0] != "run":
        return None
    flags = [a for a in argv[1:] if a in WAIT_FLAGS + FOLLOW_FLAGS]
    if len(flags) != 1:
        return None
    spec = next(a for a in argv[1:] if a not in flags)
    if spec.startswith("-"):
        return None
    from trainyard import errors
    from trainyard.sdk.quick import NotQuick

    follow = flags[0] in FOLLOW_FLAGS
    try:
        return _follow(Path(spec)) if follow else _wait(Path(spec))
    except NotQuick:
        return None
    except errors.TrainyardError as e:  # after the job exists: said as the full CLI says it
        if follow:
            from rich.markup import escape

            from trainyard.cli.output import err_console

            err_console.print(f"[red]error:[/red] {escape(e.message)}", highlight=False)
        else:
            print(f"error: {e.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _wait(spec: Path) -> int:
    from trainyard.sdk.quick import submit_and_wait

    job = submit_and_wait(spec, on_submitted=lambda job_id: print(job_id, flush=True))
    head, status, tail = ending(job)
    print(f"{head}{status}{tail}", file=sys.stderr)
    return 0 if status == "succeeded" else 1


def _follow(spec: Path) -> int:
    """As ``trainyard.cli.jobs.run`` with --follow: the same lines on the same consoles."""
    from contextlib import ExitStack

    from trainyard.sdk.quick import submit_and_follow

    with ExitStack() as stack:
        said: dict = {}

        def submitted(job: dict) -> None:
            from trainyard.cli.output import LogPrinter, err_console

            err_console.print(f"submitted [bold]{job['id']}[/bold] ({job['name']})", highlight=False)
            said["printer"] = LogPrinter(prefix=job["spec"].get("replicas", 1) > 1)
            said["spinner"] = stack.enter_context(err_console.status(f"{job['id']}: waiting for the scheduler"))

        def chunk(c: dict) -> None:
            if said.pop("spinner", None) is not None:
                stack.close()  # the spinner stops at the first chunk, as the full CLI's does
            said["printer"].add(SimpleNamespace(replica=c["replica"], data=c["data"]))

        job, points = submit_and_follow(spec, on_submitted=submitted, on_chunk=chunk)
    return _ended(job, points, said["printer"])


def _ended(job: dict, points: list[dict], printer) -> int:  # noqa: ANN001
    from trainyard.cli.output import console, err_console
    from trainyard.cli.render import metrics_table, status_text

    printer.flush()
    if points:
        console.print(metrics_table(points))
    head, status, tail = ending(job)
    err_console.print(head, status_text(status), tail, sep="", highlight=False)
    return 0 if status == "succeeded" else 1
