"""``python -m trainyard.launch.zygote``: fork launchers for attempts, with imports done once.

Starting Python and importing the launcher costs ~40 ms of CPU per attempt;
forking a process that already did it costs ~1 ms. The engine writes one
attempt dir per line on stdin and reads back the launcher's pid, one per
line, followed by its start time where the zygote wrote the attempt's handle
(:mod:`trainyard.launch.handle`) itself. Each launcher runs in its own session with its output in its
``launcher.log`` (made at its first line), so it outlives the zygote and the server alike. EOF on stdin
(the server stopped or died) ends the zygote; its launchers go on.

A launcher whose attempt left nothing in its process then tells the zygote it is
free and waits on a pipe of its own for the next attempt dir
(:mod:`trainyard.launch.handoff`): the most recently freed one takes the next
attempt, and a fork is paid only when none is free. When stdin is quiet and none
is, the zygote forks one ahead, so the next job's launcher is already there
(about 1.5 ms sooner). Free launchers past :data:`IDLE_MAX`, or idle for
:data:`IDLE_FOR` but the last one, are let go (their pipe closed: they exit).
"""

from __future__ import annotations

import gc
import os
import select
import signal
import sys
import time

from trainyard.launch import fdlimit, handle, marks, warmup
from trainyard.launch.launchlog import LaunchLog

FORKED = "zygote: forked"  # a launcher's first mark when forked for its attempt
HANDED = "zygote: handed the attempt dir"  # ... when forked ahead (its CPU clock then counts its wait's start)
QUIET = 0.005  # seconds with nothing on stdin before a launcher is forked ahead for the next attempt
IDLE_MAX = 64  # free launchers kept at most: more are let go
IDLE_FOR = 1.0  # seconds a free launcher is kept, but for the last one (the newest): a burst has gone by then


_reaped: list[int] = []  # pids the SIGCHLD handler reaped: their pipes are closed in the main loop


def _reap(*_: object) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _reaped.append(pid)


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


def _run(attempt_dir: str, seat=None):  # noqa: ANN001, ANN202
    """One attempt: its Launcher once run, or None if the launcher broke (the traceback in launcher.log).
    ``seat``: the launch.seat.Seat made while this launcher waited for it."""
    log = LaunchLog(os.path.join(attempt_dir, "launcher.log"))
    sys.stdout, sys.stderr = log.stream(1), log.stream(2)
    try:
        from pathlib import Path

        from trainyard.launch.launcher import Launcher

        launcher = Launcher(Path(attempt_dir), seat)
        launcher.run()
        return launcher
    except BaseException:  # noqa: BLE001  (a child must never return into the zygote's loop)
        import traceback

        traceback.print_exc()
        return None
    finally:
        if seat is not None:  # the launcher broke before it used or dropped it
            seat.discard()
        sys.stdout.flush()
        sys.stderr.flush()


def _read_line(fd: int) -> str | None:
    """The next attempt dir the zygote hands over on ``fd``, or None at EOF (it let go of this launcher)."""
    data = b""
    while not data.endswith(b"\n"):
        try:
            more = os.read(fd, 4096)
        except InterruptedError:
            continue
        if not more:
            return None
        data += more
    return os.fsdecode(data[:-1])


def _seat(want):  # noqa: ANN001, ANN202
    """A seat (:mod:`trainyard.launch.seat`) for the next attempt, made while this launcher waits for it:
    with the groups ``want`` names (the attempt before's), or None."""
    from trainyard.launch.seat import Seat

    return Seat.make(want)


def _wants_of(attempt_dir: str | None):  # noqa: ANN202
    """What the attempt in ``attempt_dir`` needed of a seat (launch.seat.wants), or None."""
    if attempt_dir is None:
        return None
    from pathlib import Path

    from trainyard.launch.config import LaunchConfig
    from trainyard.launch.seat import wants

    try:
        return wants(LaunchConfig.read(Path(attempt_dir)))
    except Exception:  # noqa: BLE001  (gone, or half written: the next attempt joins its groups at the spawn)
        return None


def _read_gpus(attempt_dir: str | None) -> None:
    """On a node with GPUs (as the attempt in ``attempt_dir`` saw it), their device files' minors read here once
    (launch.devices.minors): the launchers forked after inherit them, instead of each loading NVML."""
    want = _wants_of(attempt_dir)
    if want is not None and want.devices:
        from trainyard.launch import devices

        devices.minors()


def _serve(r: int, attempt_dir: str, free: int, seat=None) -> None:  # noqa: ANN001
    """A launcher's life: its attempt, then, while it is kept (:mod:`trainyard.launch.handoff`), the
    next ones the zygote hands over on ``r`` once it said on ``free`` that it is free. Never returns."""
    from trainyard.launch import handoff
    from trainyard.launch.seat import wants

    code, stderr, uses = 1, os.dup(2), 0
    try:
        while True:
            launcher = _run(attempt_dir, seat)
            uses += 1
            if launcher is None or not launcher.kept() or uses >= handoff.USES:
                code = 0 if launcher is not None else 1
                return
            launcher.leave()
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)  # the attempt's launcher.log goes with it
            os.close(null)
            os.dup2(stderr, 2)
            try:
                os.write(free, b"%d\n" % os.getpid())
            except OSError:  # the zygote is gone (or not reading): nothing more will come
                code = 0
                return
            seat = _seat(wants(launcher.config))  # said free first: a move's wait is the child's, not the zygote's
            attempt_dir = _read_line(r)
            if attempt_dir is None:
                if seat is not None:
                    seat.discard()
                code = 0
                return
            handoff.take_over()
            marks.reset()
            marks.mark(HANDED)
    finally:
        os._exit(code)


def _fork() -> int:
    """``os.fork``, the child born with SIGTERM blocked: a launcher unblocks it once its handler is in place."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    return pid


class _Kept:
    """The zygote's side of its launchers: each has a pipe it is handed attempt dirs on, and says on
    one pipe shared by all when it is free for another. A launcher let go (its pipe closed) exits."""

    def __init__(self) -> None:
        self.r, self.free = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.free, False)  # a launcher never waits on a zygote that stopped reading
        self.pipes: dict[int, int] = {}  # pid -> the write end of its pipe
        self.started: dict[int, float | None] = {}  # pid -> its start time (handle.start_time), read at the fork
        self.idle: list[tuple[int, float]] = []  # (pid, free since), the most recently freed last
        self._buf = b""

    def fork(self, attempt_dir: str | None, last: str | None = None) -> int:
        """A new launcher, for ``attempt_dir`` or, with None, forked ahead: idle until handed one, with a seat
        made for an attempt like ``last`` (the attempt dir the zygote read last)."""
        self.update()  # the pipes of launchers reaped are closed before a new one may get a pid of theirs
        r, w = os.pipe()
        pid = _fork()
        if pid == 0:
            os.close(w)
            for fd in (self.r, *self.pipes.values()):  # the others' pipes: theirs alone, or EOF never comes
                os.close(fd)
            _let_go()
            seat = None
            if attempt_dir is None:
                warmup.touch()
                seat = _seat(_wants_of(last))
                attempt_dir = _read_line(r)
                if attempt_dir is None:
                    if seat is not None:
                        seat.discard()
                    os._exit(0)
                marks.reset()
                marks.mark(HANDED)
            else:
                marks.mark(FORKED)
            _serve(r, attempt_dir, self.free, seat)
        os.close(r)
        self.pipes[pid] = w
        self.started[pid] = handle.start_time(pid)
        if attempt_dir is None:
            self.idle.append((pid, time.monotonic()))
        return pid

    def fork_ahead(self, last: str | None) -> None:
        """A launcher forked ahead, unless one came free meanwhile (during the warm-up, say)."""
        self.update()
        if not self.idle:
            self.fork(None, last)

    def update(self) -> None:
        """Take in who said they are free, and forget who exited."""
        try:
            while more := os.read(self.r, 65536):
                self._buf += more
        except BlockingIOError:
            pass
        *lines, self._buf = self._buf.split(b"\n")
        now = time.monotonic()
        self.idle.extend((int(pid), now) for pid in lines if int(pid) in self.pipes)
        while _reaped:
            self._drop(_reaped.pop())

    def hand(self, attempt_dir: str) -> int | None:
        """Give the most recently freed launcher ``attempt_dir``: its pid, or None when none is free."""
        self.update()
        while self.idle:
            pid, _ = self.idle.pop()
            try:
                os.write(self.pipes[pid], os.fsencode(attempt_dir) + b"\n")  # one write under PIPE_BUF: never split
                return pid
            except (OSError, KeyError):  # killed while it waited
                self._drop(pid)
        return None

    def retire(self) -> float | None:
        """Let go of launchers idle for longer than :data:`IDLE_FOR` (all but the newest) and of those
        past :data:`IDLE_MAX`; seconds until the next is due, or None."""
        self.update()
        now = time.monotonic()
        while len(self.idle) > IDLE_MAX or (len(self.idle) > 1 and now - self.idle[0][1] > IDLE_FOR):
            self._drop(self.idle.pop(0)[0])
        return IDLE_FOR - (now - self.idle[0][1]) if len(self.idle) > 1 else None

    def _drop(self, pid: int) -> None:
        self.idle = [i for i in self.idle if i[0] != pid]
        w = self.pipes.pop(pid, None)
        self.started.pop(pid, None)
        if w is not None:
            os.close(w)

    def close(self) -> None:
        for pid in list(self.pipes):
            self._drop(pid)


class _Lines:
    """stdin's lines, read unbuffered by anyone else: whether one is waiting must count those read already."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buf, self.woken = fd, b"", False

    def waiting(self, timeout: float | None, also: int) -> bool:
        """Whether a line is waiting, within ``timeout`` (None: however long); also back, with
        :attr:`woken` set, as soon as ``also`` is readable."""
        if b"\n" in self.buf:
            return True
        ready = select.select([self.fd, also], [], [], timeout)[0]
        self.woken = also in ready
        return self.fd in ready

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

    from trainyard.launch import handoff, launcher, procs, reporter, sampling, scratchenv, transport  # noqa: F401

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
    last = None  # the last attempt dir read: the next one is likely to need the same cgroups (launch.seat)
    kept = _Kept()
    lines = _Lines(sys.stdin.fileno())
    while True:
        due = kept.retire()
        if not lines.waiting(QUIET if not kept.idle else due, also=kept.r):
            # at a quiet moment with no launcher free, one is forked ahead for the next attempt (not
            # before the first fork: the engine started the zygote for a job, nor in a burst, where it
            # would only compete with the launchers just forked)
            if not kept.idle and not lines.woken:
                if not warmed:
                    warmup.warm()
                    _read_gpus(last)
                    gc.freeze()  # like the imports
                    warmed = True
                kept.fork_ahead(last)
            continue
        line = lines.next()
        if line is None:
            kept.close()  # EOF: the idle launchers exit, the others once their attempt is over
            return 0
        attempt_dir = line.strip()
        if not attempt_dir:
            continue
        last = attempt_dir
        pid = kept.hand(attempt_dir)
        if pid is None:
            marks.reset()
            marks.mark("zygote: read the attempt dir")
            pid = kept.fork(attempt_dir)
        sys.stdout.write(f"{pid}{_handle(attempt_dir, pid, kept.started.get(pid))}\n")
        sys.stdout.flush()


def _handle(attempt_dir: str, pid: int, started: float | None) -> str:
    """`` START`` once the attempt's handle is written here; empty where the engine must write it (no start
    time: no /proc, or the launcher gone already; or the dir refused the file)."""
    if started is None:
        return ""
    try:
        handle.write(attempt_dir, pid, started)
    except OSError:
        return ""
    return f" {started!r}"


if __name__ == "__main__":
    sys.exit(main())
