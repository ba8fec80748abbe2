"""``python -m trainyard.launch.zygote``: fork a launcher per attempt, with imports done once.

Starting Python and importing the launcher costs ~40 ms of CPU per attempt;
forking a process that already did it costs ~1 ms. The engine writes one
attempt dir per line on stdin and reads back the new launcher's pid, one per
line. Each launcher runs in its own session with its output in its
``launcher.log`` (made at its first line), so it outlives the zygote and the server alike. EOF on stdin
(the server stopped or died) ends the zygote; its launchers go on.

When stdin is quiet the zygote forks the next launcher ahead: it lets go of the
zygote's pipes and waits on a pipe of its own for its attempt dir, so the next
job's launcher is already there (about 1.5 ms sooner). In a burst the lines
keep coming, and launchers are forked as they are asked for.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import sys

from trainyard.launch import fdlimit, marks, warmup
from trainyard.launch.launchlog import LaunchLog

FORKED = "zygote: forked"  # a launcher's first mark when forked for its attempt
HANDED = "zygote: handed the attempt dir"  # ... when forked ahead (its CPU clock then counts its wait's start)
QUIET = 0.005  # seconds with nothing on stdin before a launcher is forked ahead for the next attempt


def _reap(*_: object) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _let_go() -> None:
    """A forked launcher's first steps, before it knows its attempt."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the launcher waits for its own command
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # let go of the zygote's pipes, or the engine would never see EOF
        os.dup2(null, fd)
    os.close(null)
    # fd 2 stays the zygote's stderr (the engine's zygote.log) until launcher.log is made at the first
    # line: what the interpreter itself writes before that (a fatal error) is kept there, not lost


def _child(attempt_dir: str) -> None:
    log = LaunchLog(os.path.join(attempt_dir, "launcher.log"))
    sys.stdout, sys.stderr = log.stream(1), log.stream(2)
    code = 1
    try:
        from pathlib import Path

        from trainyard.launch.launcher import Launcher

        Launcher(Path(attempt_dir)).run()
        code = 0
    except BaseException:  # noqa: BLE001  (a child must never return into the zygote's loop)
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _fork() -> int:
    """``os.fork``, the child born with SIGTERM blocked: a launcher unblocks it once its handler is in place."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    return pid


def _fork_ahead() -> tuple[int, int]:
    """A launcher forked before its attempt comes, waiting to be handed its dir on a pipe: its
    fork and first steps are then off the path of the next job. (pid, the pipe's end to write).
    EOF on that pipe (the zygote exited) ends it."""
    r, w = os.pipe()
    pid = _fork()
    if pid == 0:
        os.close(w)
        _let_go()
        warmup.touch()
        data = b""
        while not data.endswith(b"\n"):
            try:
                more = os.read(r, 4096)
            except InterruptedError:
                continue
            if not more:
                os._exit(0)
            data += more
        os.close(r)
        marks.reset()
        marks.mark(HANDED)
        _child(os.fsdecode(data[:-1]))
    os.close(r)
    return pid, w


def _hand_over(ahead: tuple[int, int], attempt_dir: str) -> int | None:
    """Give the launcher forked ahead its attempt dir: its pid, or None if it is gone."""
    pid, w = ahead
    try:
        os.write(w, os.fsencode(attempt_dir) + b"\n")  # one write, well under PIPE_BUF: never split
        return pid
    except OSError:  # killed while it waited: fork one now
        return None
    finally:
        os.close(w)


class _Lines:
    """stdin's lines, read unbuffered by anyone else: whether one is waiting must count those read already."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buf = fd, b""

    def waiting(self, timeout: float) -> bool:
        return b"\n" in self.buf or bool(select.select([self.fd], [], [], timeout)[0])

    def next(self) -> str | None:
        """The next line, or None at EOF."""
        while b"\n" not in self.buf:
            try:
                data = os.read(self.fd, 65536)
            except InterruptedError:
                continue
            if not data:
                return None
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return os.fsdecode(line)


def main() -> int:
    fdlimit.restore_limit()  # the launchers and their jobs run with the limits the server was started with
    import ctypes  # noqa: F401  (procs.become_subreaper would import it: ~2 ms per launcher)
    import shutil  # noqa: F401  (the work dir and the spare overlays import it: ~1 ms per launcher)
    import socket  # noqa: F401  (the reporter's first connection would import it)

    from trainyard.launch import launcher, procs, reporter, sampling, scratchenv, transport  # noqa: F401

    if sys.platform.startswith("linux"):
        try:
            procs.load_prctl()  # what each launcher's become_subreaper calls, looked up once here
        except (OSError, AttributeError):
            pass
    # what the imports made is never collected: a launcher's collections then skip it instead of
    # touching (and so copying) the zygote's pages
    gc.freeze()
    signal.signal(signal.SIGCHLD, _reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warmed = False
    ahead: tuple[int, int] | None = None
    lines = _Lines(sys.stdin.fileno())
    while True:
        # at a quiet moment (not before the first fork: the engine started the zygote for a job, nor
        # in a burst, where it would only compete with the launchers just forked)
        if ahead is None and not lines.waiting(QUIET):
            if not warmed:
                warmup.warm()
                gc.freeze()  # like the imports
                warmed = True
            ahead = _fork_ahead()
        line = lines.next()
        if line is None:
            if ahead is not None:
                os.close(ahead[1])  # EOF: it exits
            return 0
        attempt_dir = line.strip()
        if not attempt_dir:
            continue
        pid = None
        if ahead is not None:
            pid, ahead = _hand_over(ahead, attempt_dir), None
        if pid is None:
            marks.reset()
            marks.mark("zygote: read the attempt dir")
            pid = _fork()
            if pid == 0:
                marks.mark(FORKED)
                _let_go()
                _child(attempt_dir)
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
