"""Empty folders made ahead, for the three every attempt makes: its work dir, its outputs dir and its
job's checkpoint dir; and an empty file for its output.log.

Making a folder is the dearest thing a launcher does on the way to its command:
0.5–0.8 ms of CPU each on the bench machine after a large removal (an ext4 without a journal,
whose inode allocator reads past every inode deleted in the last 1–6 minutes: bench/fsstate.py),
where a rename costs 20 µs.
So a launcher takes its folders from a pool by renaming them into place (and
touches them: their mtime says when the attempt got them), and once its attempt
is reported makes what the pool lacks, off the next job's path. Where the pool is
empty (a burst), on another filesystem, or not there at all (no ``venv_cache``),
the folders are made as before.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

POOL = ".empty-dirs"  # in venv_cache: the engine keeps it beside the attempts, on their filesystem
KEEP = 3  # one attempt's worth: jobs one after another each find theirs made
KEEP_FILES = 1
FILE = ".f"  # the suffix of a file's name in the pool; a folder's has none


class Pool:
    def __init__(self, venv_cache: str | None) -> None:
        self.path = Path(venv_cache) / POOL if venv_cache else None
        self._names: list[str] | None = None  # listed once, at the first take
        self.taken = 0
        self.refused = False  # a take failed other than by a race: the pool is no use from here

    def wanted(self) -> bool:
        """Whether to :meth:`refill` the pool: it is there, and was of use (or empty) this time."""
        return self.path is not None and not self.refused

    def make(self, folder: Path) -> None:
        """``folder`` as an empty folder, as ``mkdir -p`` would (left as it is if it exists)."""
        if not folder.exists() and self._take(folder, file=False):
            return
        folder.mkdir(parents=True, exist_ok=True)

    def place_file(self, path: Path) -> None:
        """An empty file at ``path`` if there is none and the pool has one (else whoever opens it makes it)."""
        if not path.exists():
            self._take(path, file=True)

    def _take(self, dest: Path, file: bool) -> bool:
        if self.path is None or self.refused or not dest.parent.is_dir():
            return False
        if self._names is None:
            try:
                self._names = [n for n in os.listdir(self.path) if not n.startswith(".")]
            except OSError:
                self._names = []
        while names := [n for n in self._names if n.endswith(FILE) == file]:
            name = names[-1]
            self._names.remove(name)
            try:
                if not _blank(self.path / name, file):
                    continue  # not one this module made (or since changed): left where it is
                os.rename(self.path / name, dest)
            except FileNotFoundError:
                continue  # another launcher took that one first
            except OSError:
                self._names = []  # another filesystem (EXDEV), or a folder in the way: make them
                self.refused = True
                return False
            try:
                os.utime(dest)
            except OSError:  # only the bench's reading of when the attempt got it is off
                pass
            self.taken += 1
            return True
        return False

    def refill(self) -> None:
        """Make what the pool lacks of :data:`KEEP` folders and :data:`KEEP_FILES` files; for a launcher
        whose attempt is reported."""
        if self.path is None:
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            ready = [n for n in os.listdir(self.path) if not n.startswith(".")]
            files = sum(1 for n in ready if n.endswith(FILE))
            for _ in range(KEEP - (len(ready) - files)):
                os.mkdir(self.path / os.urandom(16).hex())
            for _ in range(KEEP_FILES - files):
                os.close(os.open(self.path / (os.urandom(16).hex() + FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except OSError as e:  # the next attempt makes its own; the launcher's log says why
            print(f"empty folders in {self.path}: {e}", flush=True)


def _blank(path: Path, file: bool) -> bool:
    """An empty folder (not a link to one), or an empty file with no other name: what :meth:`Pool.refill` makes."""
    st = os.lstat(path)
    if file:
        return stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_nlink == 1
    if not stat.S_ISDIR(st.st_mode):
        return False
    with os.scandir(path) as entries:
        return next(entries, None) is None
