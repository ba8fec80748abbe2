"""Whether a bench run pays for the files the run before it removed, and waiting until it does not.

On ext4 without a journal (the root filesystem of the 2-core bench VM), the inode allocator skips
every free inode that was deleted less than 60 s ago while its inode-table block is cached (6 min
while that block is dirty, which making files in it again does): ``recently_deleted()`` in ``fs/ext4/ialloc.c``, one buffer lookup
per inode skipped, for every file and folder made in the same block group. A bench that removes its
home at exit (a 1,000-job burst leaves ~25,000 inodes) makes every job of the next run, minutes
later, pay for it: ``perf`` put 36 % of all CPU in that function during such a run, 4 % in a run on
a settled disk, and ``throughput.py`` fell from 178 to 148 to 120 jobs/s in three runs one after
another (``bench/RESULTS.md``, session 12). Journaled ext4, XFS and tmpfs skip nothing.

So a bench that removes a home records when (:func:`removed`), and the next one on the same kind
of filesystem waits out the window first (:func:`settle`). Only a bench's own removals are known
here: anything else deleting many files on the disk shortly before a run still costs it.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

STAMP = Path.home() / ".cache" / "trainyard-bench" / "last-removal"
MANY = 2_000  # inodes: a latency run's home (~600) costs the next run's jobs a few µs each; a burst's ~25,000 ms
# seconds: 6 min, as the allocator counts for a dirty block, and the run re-dirties the very blocks whose inodes
# it skips; runs 60 and 120 s after a removal were slower, 180 s once not and once in its first burst only
WINDOW = 400.0


def _mount(path: Path) -> tuple[str, str]:
    """(device, fstype) of the mount holding ``path``: the longest mount point that is its prefix."""
    real, best = os.path.realpath(path), ("", "", "")
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, point, fstype = line.split()[:3]
            if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[1]):
                best = (dev, point, fstype)
    return best[0], best[2]


def journalless_ext4(path: Path) -> bool:
    return _journalless(*_mount(path))


def _journalless(dev: str, fstype: str) -> bool:
    name = os.path.basename(os.path.realpath(dev)) if dev.startswith("/dev/") else ""
    if fstype != "ext4" or not name or not os.path.isdir(f"/proc/fs/ext4/{name}"):
        return False
    journals = os.listdir("/proc/fs/jbd2") if os.path.isdir("/proc/fs/jbd2") else []
    return not any(j.startswith(name + "-") for j in journals)  # jbd2 names a journal "<device>-<inode>"


def describe(path: Path) -> str:
    dev, fstype = _mount(path)
    if _journalless(dev, fstype):
        return (f"home {path} on {dev} ({fstype} without a journal: a run pays for inodes removed in the "
                f"{WINDOW:.0f} s before it)")
    return f"home {path} on {dev or '?'} ({fstype or '?'})"


def settle(path: Path) -> float:
    """Sleep until :data:`WINDOW` has passed since a bench last removed a home, if ``path`` is on a
    journal-less ext4; the seconds waited."""
    if not journalless_ext4(path):
        return 0.0
    try:
        when, count = (STAMP.read_text().split() + [str(MANY)])[:2]  # an older stamp has no count
        left, count = float(when) + WINDOW - time.time(), int(count)
    except (OSError, ValueError):
        return 0.0
    if count < MANY or left <= 0:
        return 0.0
    left = min(left, WINDOW)  # a stamp from a clock set back waits no longer than the window
    print(f"waiting {left:.0f} s: a bench run removed {count} files and folders less than {WINDOW:.0f} s ago, "
          "and on this filesystem the next ones made would pay for it (bench/fsstate.py)", flush=True)
    time.sleep(left)
    return left


def removed(path: Path) -> None:
    """Remove a bench's ``path`` and record when and how much, for the next run's :func:`settle`."""
    count = sum(len(dirs) + len(files) for _, dirs, files in os.walk(path))
    shutil.rmtree(path, ignore_errors=True)
    try:
        STAMP.parent.mkdir(parents=True, exist_ok=True)
        STAMP.write_text(f"{time.time():.3f} {count}\n")
    except OSError:
        pass
