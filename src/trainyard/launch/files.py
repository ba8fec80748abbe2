"""Small file helpers shared by the launcher's steps: URLs, locks, atomic writes, a folder's real path."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Iterator


def local_path(url: str, base: Path | None = None) -> Path | None:
    """The local path behind ``url`` (a plain path or ``file://``), or None for remote URLs.

    Relative paths are taken relative to ``base`` when given.
    """
    if url.startswith(("file://", "local://")):  # fsspec's local:// too: never fetched into the shared cache
        from urllib.parse import unquote, urlsplit

        return Path(unquote(urlsplit(url).path))
    if "://" in url or "::" in url:
        return None
    path = Path(url).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return path.absolute()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``: one builder per cache entry across processes."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # a link planted there is not followed
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def atomic_write_json(path: Path, data: object) -> None:
    """Write-then-rename, so a reader sees the old file or the whole new one.

    No fsync: like the store (SQLite WAL with synchronous=NORMAL) this survives any
    process crash, not a power cut, and it sits on the path from a command's exit
    to its result reaching the server."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def append_log(path: Path, line: str) -> None:
    """Add a launcher line to output.log, marked so users can tell it from theirs."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"[trainyard] {line}\n")


def real_dir(folder: Path | str) -> Path:
    """``Path(folder).resolve()`` for a folder that exists, as the kernel names it: an ``O_PATH``
    descriptor's link in /proc is three system calls, where resolve() lstat's each part of the path in
    Python (~0.1 ms and ~25 copied pages more in a launcher fresh from the zygote)."""
    try:
        fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    except (AttributeError, OSError):  # no O_PATH (not Linux), or not a folder: resolve() says what it says
        return Path(folder).resolve()
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc
        return Path(folder).resolve()
    finally:
        os.close(fd)
    return Path(real) if real.startswith("/") else Path(folder).resolve()


def open_folder(path: str | Path, dir_fd: int | None = None) -> int:
    """``path`` opened as a folder, never through a link (a link is refused, ELOOP), and without waiting on a FIFO
    or device swapped in for it: what root holds open to walk or write in a tree another account may change."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)


def walk_held(top: int, topdown: bool = True, here: str = ".") -> Iterator[tuple[str, list[str], list[str], int]]:
    """``os.fwalk`` over the folder open as ``top``, for a tree another account may change while root walks it:
    a subfolder is opened ``O_NOFOLLOW|O_DIRECTORY|O_NONBLOCK`` (fwalk opens it by name first and compares after,
    so a link swapped in meanwhile, to a FIFO or a device, is opened as root), and a link is listed with the names,
    never as a folder. Yields ``(path relative to top, folders, names, fd of the folder)``."""
    with os.scandir(top) as it:
        entries = list(it)
    dirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    names = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
    if topdown:
        yield here, dirs, names, top
    for name in dirs:
        try:
            fd = open_folder(name, dir_fd=top)
        except OSError:  # gone, or no longer a folder: nothing of it is walked
            continue
        try:
            yield from walk_held(fd, topdown, name if here == "." else f"{here}/{name}")
        finally:
            os.close(fd)
    if not topdown:
        yield here, dirs, names, top
