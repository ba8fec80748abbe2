"""Start K processes of one replica, the way ``torchrun --nproc-per-node K`` does.

``python -m trainyard.launch.group K -- CMD ...`` runs CMD K times with
``LOCAL_RANK`` 0..K-1 and ``RANK = NODE_RANK * K + LOCAL_RANK``. If any process
fails, the others get SIGTERM at once (then SIGKILL after a few seconds), and
the group exits with the first failure's code: one bad rank fails the replica
fast instead of leaving the rest hanging in a collective. SIGTERM to the group
is passed on to every process. Standard library only.

The processes share the replica's one log, so each writes into a pipe of its own and the group passes their
output on a whole line at a time (:class:`Lines`): written straight to the log, ``print`` under the launcher's
``PYTHONUNBUFFERED`` is two writes, its text and then its newline, and two ranks' lines glued into one.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time

KILL_AFTER = 5.0
# seconds a line without its end waits for it before it is written as it is: a progress bar's last update (tqdm's
# updates each begin with a carriage return, which ends the one before), or a print cut in two by a busy node's
# scheduler, whose second half would then follow another rank's line
HOLD = 1.0
MOST = 64 * 1024  # ... or bytes
DRAIN = 1.0  # seconds the output of processes the ranks left behind is still passed on after the last rank ends


class Lines:
    """One rank's output on its way to the log: whole lines (or ``\\r`` updates) go out in one write each."""

    def __init__(self) -> None:
        self.pending, self.since = b"", 0.0

    def take(self, data: bytes, now: float) -> None:
        if not self.pending:
            self.since = now
        data = self.pending + data
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        if cut:
            write_all(data[:cut])
            data, self.since = data[cut:], now
        self.pending = data
        if len(data) >= MOST:
            self.flush()

    def due(self, now: float) -> bool:
        return bool(self.pending) and now - self.since >= HOLD

    def flush(self) -> None:
        if self.pending:
            write_all(self.pending)
            self.pending = b""


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(1, view):]
        except OSError:  # the log is gone (its disk full): the ranks keep running, their output is lost
            return


def start(command: list[str], nprocs: int) -> tuple[list[subprocess.Popen], dict[int, Lines]]:
    node_rank = int(os.environ.get("NODE_RANK", "0"))
    children, lines = [], {}
    for local in range(nprocs):
        env = {**os.environ, "LOCAL_RANK": str(local), "RANK": str(node_rank * nprocs + local),
               "LOCAL_WORLD_SIZE": str(nprocs)}
        r, w = os.pipe()
        try:
            children.append(subprocess.Popen(command, env=env, stdout=w, stderr=w))
        finally:
            os.close(w)
        os.set_blocking(r, False)
        lines[r] = Lines()
    return children, lines


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: python -m trainyard.launch.group K -- COMMAND ...", file=sys.stderr)
        return 2
    children, lines = start(argv[2:], int(argv[0]))
    stopping = {"at": None}

    def stop(*_: object) -> None:
        if stopping["at"] is None:
            stopping["at"] = time.monotonic()
            for c in children:
                if c.poll() is None:
                    c.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    sel = selectors.DefaultSelector()
    for fd in lines:
        sel.register(fd, selectors.EVENT_READ)
    first_failure, ended = None, None
    # a rank may close its output and run on, and a process it started may hold the pipe open after its end
    while ended is None or sel.get_map() and time.monotonic() - ended < DRAIN:
        relay(sel, lines)
        if ended is not None:
            continue
        codes = [c.poll() for c in children]  # each polled: one rank's end must not wait for the ranks before it
        failed = next((code for code in codes if code), None)
        if failed is not None and first_failure is None:
            first_failure = failed
            stop()
        if stopping["at"] is not None and time.monotonic() - stopping["at"] > KILL_AFTER:
            for c in children:
                if c.poll() is None:
                    c.kill()
        if None not in codes:
            ended = time.monotonic()
    for c in children:
        c.wait()
    for one in lines.values():  # pipes still open past DRAIN
        one.flush()
    if first_failure is None:
        first_failure = next((c.returncode for c in children if c.returncode), 0)
    return 128 - first_failure if first_failure < 0 else first_failure


def relay(sel: selectors.BaseSelector, lines: dict[int, Lines]) -> None:
    """Pass on what the ranks wrote within the next 50 ms; a pipe at its end (every process holding it ended)
    is let go."""
    for key, _ in sel.select(0.05):
        fd, now = key.fd, time.monotonic()
        try:
            data = os.read(fd, MOST)
        except BlockingIOError:
            continue
        if data:
            lines[fd].take(data, now)
        else:
            lines.pop(fd).flush()
            sel.unregister(fd)
            os.close(fd)
    now = time.monotonic()
    for fd, one in lines.items():
        if one.due(now):
            try:  # what came since the select (this process may have waited for a core longer than HOLD)
                more = os.read(fd, MOST)
            except BlockingIOError:
                more = b""
            if more:
                one.take(more, now)
            if one.due(now):
                one.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
