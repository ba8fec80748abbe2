"""A replica's own memory cgroup: a hard limit the kernel enforces, and its OOM kills counted.

Sampling the tree's RSS (``procs.tree_rss``) misses whatever happens between two
samples: a job that touched 500 MB for 0.2 s under a 100 MiB limit got through.
Where the host lets us, the replica's whole process tree runs in a cgroup of its
own instead, with a hard limit: the kernel's OOM killer acts inside the group at
the first page past the limit, and the group's own counters say that it did.

- ``cgroup-v1``: ``<root>/memory`` is the v1 memory controller and we may create
  groups in it (root). The group is ``<root>/memory/<our group>/trainyard/<attempt>-r<replica>``
  with ``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes`` (memory plus
  swap, so swapping does not dodge the limit); OOM kills are the ``oom_kill``
  counter of ``memory.oom_control`` (kernels before 4.13 lack it: then a SIGKILL
  while ``memory.failcnt`` > 0 counts).
- ``cgroup-v2``: ``<root>/cgroup.controllers`` lists ``memory``, it is enabled for
  the children of the root (or of a ``trainyard`` subtree an admin delegated to
  us), and we may write there. The group is ``<root>/trainyard/<attempt>-r<replica>``
  with ``memory.max``, ``memory.swap.max`` 0 and ``memory.oom.group`` 1 (the kernel
  kills the whole group at once, not one process); OOM kills are the ``oom_kill``
  counter of ``memory.events``.
- ``sampled``: anything else (no cgroups, read-only, not root): the launcher
  samples the tree's RSS, as before.

The launcher itself stays outside the group, so it survives the OOM kill, reaps
the rest of the tree and reports ``OOMKilled``. The group is removed when the
replica ends; empty groups that a crashed launcher left behind are removed by the
next launcher that makes one (:func:`sweep`).

Plain ``os`` calls and small file writes only, and only when a limit is set: the
launcher's start-up time is benchmarked.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Callable

MOUNT = "/sys/fs/cgroup"
V1, V2, SAMPLED = "cgroup-v1", "cgroup-v2", "sampled"
PARENT = "trainyard"
SHELL = "/bin/sh"
STALE_AFTER = 60.0  # an empty group this old has lost its launcher (a live one fills it within ms)
JOIN_FAILED = 125   # the shim's exit code when the command could not join its group

# How the command enters its group before it runs anything of its own: it is
# started as ``sh -c 'echo 0 > PROCS && exec "$@"' PROCS COMMAND...``. Writing 0
# to ``cgroup.procs`` moves the writer (the shell) into the group, and ``exec``
# keeps both the pid and the group, so the command's first instruction already
# runs under the limit and everything it forks inherits the group. The
# alternatives are worse: writing the child's pid from the launcher after the
# fork races the child (it may have exec'd and allocated by then); ``preexec_fn``
# forces subprocess onto fork instead of vfork and is unsafe with threads;
# ``clone3(CLONE_INTO_CGROUP)`` is not reachable from Python; moving the launcher
# into the group around the spawn would put it, for a moment, where the OOM
# killer looks. The shell (dash) costs about a millisecond. Should the join fail
# (it cannot once detect() and make() succeeded, short of an admin removing the
# group), the shell says so in the log and exits 125 rather than run the command
# without its limit.
_SHIM = ('echo 0 > "$0" && exec "$@"; '
         f'echo "trainyard: cannot join the memory cgroup $0" >&2; exit {JOIN_FAILED}')


def detect(root: str = MOUNT) -> str:
    """How this host can enforce a replica's memory limit: ``V1``, ``V2`` or ``SAMPLED``.

    Read-only and cheap (a few ``stat`` calls). ``root`` is where cgroups are
    mounted; tests point it at a folder laid out like any host.
    """
    if not os.access(SHELL, os.X_OK):
        return SAMPLED
    if "memory" in _read(os.path.join(root, "cgroup.controllers")).split():
        return V2 if _v2_usable(root) else SAMPLED
    mem = os.path.join(root, "memory")  # v1, or the v1 half of a hybrid host
    if os.path.isfile(os.path.join(mem, "memory.limit_in_bytes")) and _may_create(v1_parent(root)):
        return V1
    return SAMPLED


def _v2_usable(root: str) -> bool:
    parent = os.path.join(root, PARENT)
    # Our groups get the memory controller only if their parent enables it for
    # its children, which it can only if its own parent enables it: the root
    # (systemd does) or, for a delegated ``trainyard`` subtree, the admin did.
    enabled = (_read(os.path.join(parent, "cgroup.subtree_control"))
               + _read(os.path.join(root, "cgroup.subtree_control"))).split()
    if "memory" not in enabled or not _may_create(parent):
        return False
    # Moving a process between groups needs write access to cgroup.procs of the
    # common ancestor of both (the delegation rule): ``trainyard`` when the
    # launcher runs inside the delegated subtree, the root otherwise.
    ancestor = parent if _own_v2_path().startswith(f"/{PARENT}/") else root
    return os.access(os.path.join(ancestor, "cgroup.procs"), os.W_OK)


def _may_create(parent: str) -> bool:
    """Whether we may make groups in ``parent``, or make ``parent`` itself."""
    return os.access(parent if os.path.isdir(parent) else os.path.dirname(parent), os.W_OK)


def v1_parent(root: str) -> str:
    """Where our v1 groups go: under the group this process is in (a container's or a service's), so
    the limits above it still hold; under the controller's root when that group is not visible here."""
    own = ""
    for line in _read("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            own = path.strip("/")
    base = os.path.join(root, "memory", own) if own else os.path.join(root, "memory")
    return os.path.join(base if os.path.isdir(base) else os.path.join(root, "memory"), PARENT)


def _own_v2_path() -> str:
    for line in _read("/proc/self/cgroup").splitlines():
        if line.startswith("0::"):
            return line[3:]
    return "/"


class MemoryGroup:
    """One replica's memory cgroup: :meth:`make` it, start the command through
    :meth:`wrap`, ask :meth:`oom_kills` while it runs, :meth:`remove` it at the end."""

    def __init__(self, path: str, version: str, limit: int):
        self.path = path
        self.version = version
        self.limit = limit

    @classmethod
    def make(cls, root: str, version: str, name: str, limit: int) -> "MemoryGroup":
        """Create the group with its limit; raises ``OSError`` when the host refuses."""
        parent = v1_parent(root) if version == V1 else os.path.join(root, PARENT)
        os.makedirs(parent, exist_ok=True)
        if version == V2 and "memory" not in _read(os.path.join(parent, "cgroup.subtree_control")).split():
            _write(os.path.join(parent, "cgroup.subtree_control"), "+memory")
        sweep(parent)
        name = name.replace("/", "_").lstrip(".") or "replica"
        path = os.path.join(parent, name)
        try:
            os.mkdir(path)
        except FileExistsError:  # a relaunch of the same replica while the old group still holds processes
            path = f"{path}-{os.getpid()}"
            os.mkdir(path)
        group = cls(path, version, limit)
        try:
            group._set_limit()
        except OSError:
            group.remove()
            raise
        return group

    def _set_limit(self) -> None:
        if self.version == V1:
            # memory first: memsw may never be below it, and a new group starts unlimited
            _write(self._file("memory.limit_in_bytes"), str(self.limit))
            if os.path.exists(self._file("memory.memsw.limit_in_bytes")):
                _write(self._file("memory.memsw.limit_in_bytes"), str(self.limit))
            else:  # no swap accounting (swapaccount=0): keep the group from swapping at all
                _write(self._file("memory.swappiness"), "0", optional=True)
        else:
            _write(self._file("memory.max"), str(self.limit))
            _write(self._file("memory.swap.max"), "0", optional=True)  # absent without swap support
            _write(self._file("memory.oom.group"), "1", optional=True)  # absent before Linux 4.19

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run so that it joins this group first (see ``_SHIM``)."""
        return [SHELL, "-c", _SHIM, self._file("cgroup.procs"), *argv]

    def oom_kills(self) -> int | None:
        """How many processes the kernel's OOM killer killed in the group; None if the kernel does not say."""
        text = _read(self._file("memory.oom_control" if self.version == V1 else "memory.events"))
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return None

    def oom_killed(self, returncode: int | None) -> bool:
        """Whether the group ran out of memory and the kernel killed in it."""
        kills = self.oom_kills()
        if kills is not None:
            return kills > 0
        # v1 before Linux 4.13: no counter; the limit was hit and the command got SIGKILL
        return returncode == -signal.SIGKILL and int(_read(self._file("memory.failcnt")) or 0) > 0

    def oom_message(self) -> str:
        """What the replica's end says of an OOM kill in the group."""
        peak = self.peak()
        return (f"the kernel's OOM killer stopped it at the memory limit of {mib(self.limit)}"
                f" ({self.version}{f', peak {mib(peak)}' if peak else ''})")

    def peak(self) -> int | None:
        """The group's highest memory use, in bytes, where the kernel keeps it."""
        text = _read(self._file("memory.max_usage_in_bytes" if self.version == V1 else "memory.peak"))
        return int(text) if text.strip().isdigit() else None

    def pids(self) -> list[int]:
        return [int(p) for p in _read(self._file("cgroup.procs")).split()]

    def remove(self, timeout: float = 5.0) -> bool:
        """Remove the group; returns whether it is gone. Never raises.

        Call once the tree is reaped. The kernel may still count a process that
        has just exited (EBUSY) for a moment, over a second on a loaded host
        (seen in CI), so retry for a while; anything still
        listed in the group after that is killed, since it can only be ours.
        """
        end = time.monotonic() + timeout
        while True:
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:  # already removed (by a sweep, after a long upload)
                return True
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > end:
                    return False
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)


def for_replica(root: str | None, limit: int | None, name: str, say: Callable[[str], None]) -> MemoryGroup | None:
    """The replica's own memory cgroup under ``root`` with ``limit``, or None to sample the tree's RSS instead:
    no limit, no usable cgroups here, or the host looked able but refused (``say`` tells the job's log)."""
    if not limit or not root:
        return None
    mode = detect(root)
    if mode == SAMPLED:
        return None
    try:
        return MemoryGroup.make(root, mode, name, limit)
    except OSError as e:  # the limit still holds, sampled
        say(f"cannot make a memory cgroup ({mode}): {e}; sampling the memory use instead")
        return None


def mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB"


def sweep(parent: str, stale_after: float = STALE_AFTER) -> int:
    """Remove empty groups under ``parent`` older than ``stale_after`` seconds; returns how many.

    A live launcher fills its group within milliseconds of making it and removes
    it itself right after the tree is reaped, so an old empty group is one whose
    launcher died. A group's mtime is when it was made (cgroup files do not touch
    it), and the kernel refuses to remove a group that still holds a process
    (EBUSY), so no check of ours can race a process joining.
    """
    removed = 0
    now = time.time()
    try:
        entries = os.scandir(parent)
    except OSError:
        return 0
    with entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False) and now - entry.stat().st_mtime >= stale_after:
                    os.rmdir(entry.path)
                    removed += 1
            except OSError:
                pass
    return removed


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _write(path: str, value: str, optional: bool = False) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError:  # optional: a knob this kernel lacks or refuses leaves the limit itself in place
        if not optional:
            raise
