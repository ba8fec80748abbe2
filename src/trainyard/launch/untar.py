"""A code snapshot (a tar.gz a user uploaded) extracted into a work dir by the launcher, which may be root: nothing
it writes may land outside the work dir, whatever the archive holds and whatever this Python's ``tarfile`` is.

``tarfile``'s ``data`` filter alone is not enough: before 3.11.13/3.12.11 it judged a link by ``realpath``, which
stops following links past ``PATH_MAX``, so a deep chain of symlinks in the archive pointed a later member's
path outside (CVE-2025-4517). Here links are made last, by hand, so no member is ever written through one:

1. every name is checked as text (relative, no ``..`` climbing out), every link's target too, and the members'
   kinds, count and total size;
2. directories and regular files are extracted (with the ``data`` filter where there is one): no link exists in
   the work dir yet, so nothing is written through one;
3. hard links, to a regular file extracted in 2, in directories that are directories (not links);
4. symbolic links, each in a directory that is a directory (not a link), with a target that names no ``..`` past
   its start: each link then resolves inside the work dir from where it stands, and so does any chain of them.
"""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path
from typing import IO

MAX_MEMBERS = 500_000  # a repository's files; more is not code
MAX_HEADER = 1 << 20  # a PAX header or GNU long name: paths are at most 4 KiB
MAX_BYTES = 4 << 30  # extracted: a 512 MiB upload of zeros would otherwise fill a node's disk (~1000:1)


class UnsafeArchive(Exception):
    """The snapshot holds something that would land outside the work dir, or too much."""


def extract(fileobj: IO[bytes], dest: Path) -> None:
    """Extract the tar archive ``fileobj`` into the existing folder ``dest``; :class:`UnsafeArchive` before
    anything is written when the archive fails a check of its own, or when a link's place turns out unsafe."""
    with tarfile.open(fileobj=fileobj, mode="r:*", tarinfo=_Bounded) as tar:
        members, total = [], 0
        for m in tar:  # one header at a time: a stream of empty headers stops at the limit, not at root's memory
            if len(members) == MAX_MEMBERS:
                raise UnsafeArchive(f"more than {MAX_MEMBERS:,} members")
            _check(m)
            total += max(m.size, 0)
            if total > MAX_BYTES:
                raise UnsafeArchive(f"more than {MAX_BYTES >> 30} GiB once extracted")
            members.append(m)
        plain = [m for m in members if m.isfile() or m.isdir()]
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, members=plain, filter="data")
        else:  # a Python without filters: the checks above refused what the filter would
            tar.extractall(dest, members=plain)
    root = os.path.realpath(dest)
    for m in plain:  # before any link is made: no path here goes through one
        os.chmod(os.path.join(root, os.path.normpath(m.name)), mode_of(m))
    for m in members:  # before any symlink is made: no path here goes through one
        if m.islnk():
            target = os.path.join(root, os.path.normpath(m.linkname))
            if not os.path.isfile(target) or os.path.islink(target):
                raise UnsafeArchive(f"hard link {m.name!r} -> {m.linkname!r}: not a file of the archive")
            _replace(root, m.name, lambda p, t=target: os.link(t, p))
    for m in members:
        if m.issym():
            _replace(root, m.name, lambda p, t=m.linkname: os.symlink(t, p))


def mode_of(m: tarfile.TarInfo) -> int:
    """The mode a member gets, whatever this Python's ``tarfile`` would give it (the ``data`` filter makes an
    owner's 0400 a 0600, a Python without filters keeps setuid): the owner's bits as packed, readable (and a
    folder searchable) by the owner, whom ``--os-user`` makes the job's account; group and other as packed
    without write; never setuid, setgid or sticky."""
    return (m.mode & 0o755) | (0o700 if m.isdir() else 0o400)


class _Bounded(tarfile.TarInfo):
    """A header whose long name or PAX records tarfile would read whole into memory is refused past MAX_HEADER: a
    small gzip can declare gigabytes of them."""

    def _proc_pax(self, tarfile):  # noqa: ANN001, ANN202 - tarfile's own hooks
        if self.size > MAX_HEADER:
            raise UnsafeArchive(f"an extended header of {self.size:,} bytes")
        return super()._proc_pax(tarfile)

    def _proc_gnulong(self, tarfile):  # noqa: ANN001, ANN202
        if self.size > MAX_HEADER:
            raise UnsafeArchive(f"a long name of {self.size:,} bytes")
        return super()._proc_gnulong(tarfile)


def _check(m: tarfile.TarInfo) -> None:
    if _escapes(m.name):
        raise UnsafeArchive(f"unsafe path in archive: {m.name!r}")
    if m.issym():
        if not _plain(m.linkname) or _escapes(os.path.join(os.path.dirname(m.name), m.linkname)):
            raise UnsafeArchive(f"link points outside: {m.name!r} -> {m.linkname!r}")
    elif m.islnk():
        if _escapes(m.linkname):
            raise UnsafeArchive(f"link points outside: {m.name!r} -> {m.linkname!r}")
    elif not (m.isfile() or m.isdir()):
        raise UnsafeArchive(f"unsupported member type: {m.name!r}")


def _escapes(name: str) -> bool:
    """Whether an archive path is absolute or climbs out of the folder it is extracted in."""
    if name.startswith(("/", "\\")) or os.path.isabs(name) or "\0" in name:
        return True
    norm = os.path.normpath(name)
    return norm == ".." or norm.startswith("../")


def _plain(target: str) -> bool:
    """Whether a link's target is relative with no ``..`` after a name: ``a/..`` is not where ``a`` is when ``a``
    is a link, so only a target that climbs first and then descends resolves where its text says."""
    if not target or os.path.isabs(target) or "\0" in target:
        return False
    parts = [p for p in target.split("/") if p not in ("", ".")]
    up = 0
    while up < len(parts) and parts[up] == "..":
        up += 1
    return ".." not in parts[up:]


def _replace(root: str, name: str, make) -> None:  # noqa: ANN001
    """``make(path)`` for the member ``name``, once every folder on its way is known to be a folder (made if the
    archive did not list it), not a link; over a file or link of that name (a later member replaces an earlier)."""
    path = root
    parts = os.path.normpath(name).split("/")
    for part in parts[:-1]:
        path = os.path.join(path, part)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            os.mkdir(path, 0o755)
            continue
        if not stat.S_ISDIR(mode):
            raise UnsafeArchive(f"{name!r}: {os.path.relpath(path, root)!r} on its way is a link or a file")
    path = os.path.join(path, parts[-1])
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise UnsafeArchive(f"{name!r}: a folder of the archive has the name of this link")
        os.unlink(path)
    except FileNotFoundError:
        pass
    make(path)
