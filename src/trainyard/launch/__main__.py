"""``python -m trainyard.launch ATTEMPT_DIR``: run one attempt (see :mod:`trainyard.launch`).

``python -m trainyard.launch --standby`` is a spare: it starts the interpreter
and does its imports ahead of time, then reads one attempt dir from stdin and
runs it (EOF: exit quietly). An engine keeps one spare ready so an attempt
does not wait ~40 ms for Python to start.

Exits 0 whenever the attempt was carried through, whatever its outcome (that is
in result.json); 1 only when the launcher itself broke, 2 on bad usage.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--standby"]:
        attempt_dir = _standby()
        if attempt_dir is None:
            return 0
        args = [attempt_dir]
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m trainyard.launch ATTEMPT_DIR | --standby", file=sys.stderr)
        return 2
    from trainyard.launch.launcher import Launcher

    try:
        Launcher(Path(args[0])).run()
    except Exception:
        import traceback

        traceback.print_exc()
        return 1
    return 0


def _standby() -> str | None:
    """Import what an attempt needs, then wait for one; its output goes to its launcher.log."""
    import socket  # noqa: F401  (the reporter's first connection would import it)

    from trainyard.launch import launcher, reporter, transport  # noqa: F401

    line = sys.stdin.readline().strip()
    if not line:
        return None
    fd = os.open(os.path.join(line, "launcher.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return line


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown (about 10 ms here): everything the launcher wrote
    # is closed and on disk, and an engine waits on this exit before it moves on.
    os._exit(code)
