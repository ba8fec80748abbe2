"""``python -m trainyard.launch.zygote``: fork a launcher per attempt, with imports done once.

Starting Python and importing the launcher costs ~40 ms of CPU per attempt;
forking a process that already did it costs ~1 ms. The engine writes one
attempt dir per line on stdin and reads back the new launcher's pid, one per
line. Each launcher runs in its own session with its output in its
``launcher.log`` (made at its first line), so it outlives the zygote and the server alike. EOF on stdin
(the server stopped or died) ends the zygote; its launchers go on.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import sys

from trainyard.launch import marks


def _reap(*_: object) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class _LaunchLog:
    """A forked launcher's ``launcher.log``, made at its first line rather than at every fork: most
    launchers never write one, and making a file costs up to half a millisecond of CPU on a busy
    ext4 (its inode allocator skips recently deleted inodes one by one). Once made, it is the
    launcher's fds 1 and 2 too; before, they are /dev/null, as the zygote's own stderr is."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.made = False

    def make(self) -> None:
        if not self.made:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            self.made = True

    def stream(self, fd: int) -> "_LazyStream":
        return _LazyStream(self, fd)


class _LazyStream:
    """``sys.stdout`` or ``sys.stderr`` over a :class:`_LaunchLog`: the file opens on the first write."""

    def __init__(self, log: _LaunchLog, fd: int) -> None:
        self._log, self._fd, self._file = log, fd, None

    def _real(self):  # noqa: ANN202
        if self._file is None:
            self._log.make()
            self._file = open(self._fd, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                              buffering=1, closefd=False)
        return self._file

    def write(self, text: str) -> int:
        return self._real().write(text)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def fileno(self) -> int:
        self._real()
        return self._fd

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str):  # noqa: ANN204  (writelines, encoding, ...: the real file's)
        return getattr(self._real(), name)


def _child(attempt_dir: str) -> None:
    marks.mark("zygote: forked")
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the launcher waits for its own command
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # let go of the zygote's pipes, or the engine would never see EOF
        os.dup2(null, fd)
    os.close(null)
    log = _LaunchLog(os.path.join(attempt_dir, "launcher.log"))
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


def main() -> int:
    import ctypes  # noqa: F401  (procs.become_subreaper would import it: ~2 ms per launcher)
    import shutil  # noqa: F401  (the work dir and the spare overlays import it: ~1 ms per launcher)
    import socket  # noqa: F401  (the reporter's first connection would import it)

    from trainyard.launch import launcher, reporter, sampling, scratchenv, transport, warmup  # noqa: F401

    # what the imports made is never collected: a launcher's collections then skip it instead of
    # touching (and so copying) the zygote's pages
    gc.freeze()
    signal.signal(signal.SIGCHLD, _reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warmed = False
    while True:
        if not warmed and not select.select([sys.stdin], [], [], 0)[0]:
            # at the first moment nothing waits (not before the first fork: the engine started the
            # zygote for a job), and frozen like the imports
            warmup.warm()
            gc.freeze()
            warmed = True
        line = sys.stdin.readline()
        if not line:
            return 0
        attempt_dir = line.strip()
        if not attempt_dir:
            continue
        marks.reset()
        marks.mark("zygote: read the attempt dir")
        # the launcher is born with SIGTERM blocked, and unblocks it once its handler is in place
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        pid = os.fork()
        if pid == 0:
            _child(attempt_dir)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
