"""Start K processes of one replica, the way ``torchrun --nproc-per-node K`` does.

``python -m trainyard.launch.group K -- CMD ...`` runs CMD K times with
``LOCAL_RANK`` 0..K-1 and ``RANK = NODE_RANK * K + LOCAL_RANK``. If any process
fails, the others get SIGTERM at once (then SIGKILL after a few seconds), and
the group exits with the first failure's code: one bad rank fails the replica
fast instead of leaving the rest hanging in a collective. SIGTERM to the group
is passed on to every process. Standard library only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

KILL_AFTER = 5.0


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: python -m trainyard.launch.group K -- COMMAND ...", file=sys.stderr)
        return 2
    nprocs, command = int(argv[0]), argv[2:]
    node_rank = int(os.environ.get("NODE_RANK", "0"))
    children = []
    for local in range(nprocs):
        env = {**os.environ, "LOCAL_RANK": str(local), "RANK": str(node_rank * nprocs + local),
               "LOCAL_WORLD_SIZE": str(nprocs)}
        children.append(subprocess.Popen(command, env=env))

    stopping = {"at": None}

    def stop(*_: object) -> None:
        if stopping["at"] is None:
            stopping["at"] = time.monotonic()
            for c in children:
                if c.poll() is None:
                    c.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    first_failure = None
    while any(c.poll() is None for c in children):
        for c in children:
            if c.returncode not in (None, 0) and first_failure is None:
                first_failure = c.returncode
                stop()
        if stopping["at"] is not None and time.monotonic() - stopping["at"] > KILL_AFTER:
            for c in children:
                if c.poll() is None:
                    c.kill()
        time.sleep(0.05)
    if first_failure is None:
        first_failure = next((c.returncode for c in children if c.returncode), 0)
    return 128 - first_failure if first_failure < 0 else first_failure


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
