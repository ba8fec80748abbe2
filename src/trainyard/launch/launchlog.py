"""A forked launcher's ``launcher.log``, made at its first line (see :mod:`trainyard.launch.zygote`)."""

from __future__ import annotations

import os


class LaunchLog:
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

    def stream(self, fd: int) -> "LazyStream":
        return LazyStream(self, fd)


class LazyStream:
    """``sys.stdout`` or ``sys.stderr`` over a :class:`LaunchLog`: the file opens on the first write."""

    def __init__(self, log: LaunchLog, fd: int) -> None:
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
