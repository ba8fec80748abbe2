"""The ``trainyard`` command's entry point: ``trainyard run SPEC.yaml --wait`` the quick way, else the CLI.

Building the CLI (typer, rich) and the full SDK costs several times what a short job takes; a
plain ``run SPEC.yaml --wait`` whose spec the server can take as it is goes through
:mod:`trainyard.sdk.quick` instead, printing what the full command prints. Whatever that path
declines (other arguments, a spec with files to prepare, no server up yet, a refusal) is the
full command's, and nothing was submitted by then.
"""

from __future__ import annotations

import sys
from pathlib import Path

from trainyard.cli.ended import ending

WAIT_FLAGS = ("--wait", "-w")


def main() -> None:
    code = quick(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from trainyard.cli.main import app

    app(prog_name="trainyard")


def quick(argv: list[str]) -> int | None:
    """The exit code of ``run SPEC.yaml --wait`` done the quick way; None when it is the full CLI's."""
    if len(argv) != 3 or argv[0] != "run" or sum(a in WAIT_FLAGS for a in argv[1:]) != 1:
        return None
    spec = next(a for a in argv[1:] if a not in WAIT_FLAGS)
    if spec.startswith("-"):
        return None
    from trainyard import errors
    from trainyard.sdk.quick import NotQuick, submit_and_wait

    try:
        job = submit_and_wait(Path(spec), on_submitted=lambda job_id: print(job_id, flush=True))
    except NotQuick:
        return None
    except errors.TrainyardError as e:  # after the job exists: said as the full CLI says it
        print(f"error: {e.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    head, status, tail = ending(job)
    print(f"{head}{status}{tail}", file=sys.stderr)
    return 0 if status == "succeeded" else 1
