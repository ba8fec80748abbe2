"""``python -m trainyard.launch ATTEMPT_DIR``: run one attempt (see :mod:`trainyard.launch`).

To skip the ~40 ms of interpreter start per attempt, an engine may instead
fork launchers from :mod:`trainyard.launch.zygote`.

Exits 0 whenever the attempt was carried through, whatever its outcome (that is
in result.json); 1 only when the launcher itself broke, 2 on bad usage.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m trainyard.launch ATTEMPT_DIR", file=sys.stderr)
        return 2
    from trainyard.launch.fdlimit import restore_limit
    from trainyard.launch.launcher import Launcher

    restore_limit()  # the job runs with the limits the server was started with, not the ones it raised

    try:
        Launcher(Path(args[0])).run()
    except Exception:
        import traceback

        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown (about 10 ms here): everything the launcher wrote
    # is closed and on disk, and an engine waits on this exit before it moves on.
    os._exit(code)
