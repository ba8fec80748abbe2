"""A replica's own memory cgroup: a hard limit the kernel enforces, and its OOM kills counted.

Sampling the tree's RSS (``procs.tree_rss``) misses whatever happens between two samples: a job that touched 500 MB
for 0.2 s under a 100 MiB limit got through. Where the host lets us, the replica's whole process tree runs in a cgroup
of its own instead, with a hard limit: the kernel's OOM killer acts inside the group at the first page past the limit,
and the group's own counters say that it did.

- ``cgroup-v1``: ``<root>/memory`` is the v1 memory controller and we may create groups in it (root). The group is
  ``<root>/memory/<our group>/trainyard/<attempt>-r<replica>`` with ``memory.limit_in_bytes`` and
  ``memory.memsw.limit_in_bytes`` (memory plus swap, so swapping does not dodge the limit); OOM kills are the
  ``oom_kill`` counter of ``memory.oom_control`` (kernels before 4.13 lack it: then a SIGKILL while ``memory.failcnt``
  > 0 counts).
- ``cgroup-v2``: ``<root>/cgroup.controllers`` lists ``memory``, it is enabled for the children of the root (or of a
  ``trainyard`` subtree an admin delegated to us), and we may write there. The group is
  ``<root>/trainyard/<attempt>-r<replica>`` with ``memory.max``, ``memory.swap.max`` 0 and ``memory.oom.group`` 1 (the
  kernel kills the whole group at once, not one process); OOM kills are the ``oom_kill`` counter of ``memory.events``.
- ``sampled``: anything else (no cgroups, read-only, not root): the launcher samples the tree's RSS, as before.

The launcher itself stays outside the group, so it survives the OOM kill, reaps the rest of the tree and reports
``OOMKilled``. The group is removed when the replica ends; empty groups that a crashed launcher left behind are
removed by the next launcher that makes one (:func:`sweep`). A launcher that waited for its attempt made the groups
while it waited, with a child of its already in them (:mod:`trainyard.launch.seat`): the command then runs in that
child, with no move on its way to start; the shim below is the way in for the others.

Plain ``os`` calls and small file writes only, and only when a limit is set (the launcher's start-up is benchmarked).
What any replica's group does (made, joined, removed, swept) is here too, for its pids, cpu and devices groups
(:mod:`trainyard.launch.pidlimit`, :mod:`~trainyard.launch.cpulimit`, :mod:`~trainyard.launch.devices`).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import TypeVar

MOUNT = "/sys/fs/cgroup"
V1, V2, SAMPLED = "cgroup-v1", "cgroup-v2", "sampled"
PARENT = "trainyard"
SHELL = "/bin/sh"
STALE_AFTER = 60.0  # an empty group this old has lost its launcher (a live one fills it within ms)
JOIN_FAILED = 125   # the shim's exit code when the command could not join its group

# How the command enters its groups before it runs anything of its own: it is started as
# ``sh -c 'for each PROCS: echo 0 > PROCS; exec "$@"' sh PROCS... -- COMMAND...`` (a memory group and, on
# cgroup v1, a pids, a cpu and a devices group of their own: launch.pidlimit, launch.cpulimit, launch.devices).
# Writing 0 to ``cgroup.procs`` moves the writer (the shell) into the group, and ``exec`` keeps both the pid and
# the group, so the command's first instruction already runs under the limit and everything it forks inherits
# the group. The alternatives are worse: writing the child's pid from the launcher after the fork races the
# child (it may have exec'd and allocated by then); ``preexec_fn`` forces subprocess onto fork instead of vfork
# and is unsafe with threads; ``clone3(CLONE_INTO_CGROUP)`` is not reachable from Python; moving the launcher
# into the group around the spawn would put it, for a moment, where the OOM killer looks. The shell (dash) costs
# about a millisecond. Should the join fail (it cannot once detect() and make() succeeded, short of an admin
# removing the group), the shell says so in the log and exits 125 rather than run the command without its
# limit. The groups' files are absolute paths: the first ``--`` is ours.
_SHIM = ('for g; do [ "$g" = -- ] && break; echo 0 > "$g" || '
         f'{{ echo "trainyard: cannot join the cgroup $g" >&2; exit {JOIN_FAILED}; }}; shift; done; shift; exec "$@"')


def detect(root: str = MOUNT) -> str:
    """How this host can enforce a replica's memory limit: ``V1``, ``V2`` or ``SAMPLED``.

    Read-only and cheap (a few ``stat`` calls). ``root`` is where cgroups are
    mounted; tests point it at a folder laid out like any host.
    """
    return detect_controller(root, "memory", "memory.limit_in_bytes") or SAMPLED


def detect_controller(root: str, controller: str, v1_file: str) -> str | None:
    """How this host can give a replica a group of ``controller``: ``V1``, ``V2``, or None where it cannot.
    ``v1_file``: a file of the v1 controller's root, there where that controller is mounted."""
    if not os.access(SHELL, os.X_OK):
        return None
    if controller in read(os.path.join(root, "cgroup.controllers")).split():
        return V2 if v2_usable(root, controller) else None
    # v1, or the v1 half of a hybrid host
    if os.path.isfile(os.path.join(root, controller, v1_file)) and may_create(v1_parent(root, controller)):
        return V1
    return None


def v2_usable(root: str, controller: str) -> bool:
    """Whether we may make cgroup v2 groups under ``root`` that get ``controller`` and move processes into them."""
    parent = os.path.join(root, PARENT)
    # Our groups get the controller only if their parent enables it for
    # its children, which it can only if its own parent enables it: the root
    # (systemd does) or, for a delegated ``trainyard`` subtree, the admin did.
    enabled = (read(os.path.join(parent, "cgroup.subtree_control"))
               + read(os.path.join(root, "cgroup.subtree_control"))).split()
    return controller in enabled and v2_movable(root)


def v2_movable(root: str) -> bool:
    """Whether we may make cgroup v2 groups under ``root`` and move processes into them (what a device program,
    which needs no controller, asks: launch.devices)."""
    parent = os.path.join(root, PARENT)
    if not may_create(parent):
        return False
    # Moving a process between groups needs write access to cgroup.procs of the
    # common ancestor of both (the delegation rule): ``trainyard`` when the
    # launcher runs inside the delegated subtree, the root otherwise.
    ancestor = parent if own_v2_path().startswith(f"/{PARENT}/") else root
    return os.access(os.path.join(ancestor, "cgroup.procs"), os.W_OK)


def may_create(parent: str) -> bool:
    """Whether we may make groups in ``parent``, or make ``parent`` itself."""
    return os.access(parent if os.path.isdir(parent) else os.path.dirname(parent), os.W_OK)


def v1_parent(root: str, controller: str = "memory") -> str:
    """Where our v1 groups of ``controller`` go: under the group this process is in (a container's or a
    service's), so the limits above it still hold; under the controller's root when that group is not visible."""
    own = ""
    for line in read("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            own = path.strip("/")
    base = os.path.join(root, controller, own) if own else os.path.join(root, controller)
    return os.path.join(base if os.path.isdir(base) else os.path.join(root, controller), PARENT)


def own_v2_path() -> str:
    """This process's cgroup v2 path, "/" where it is in none."""
    for line in read("/proc/self/cgroup").splitlines():
        if line.startswith("0::"):
            return line[3:]
    return "/"


class Group:
    """One of a replica's cgroups, at ``path``: the command joins it through :func:`wrap`, :meth:`remove` at the end.
    ``owned``: False where it is the replica's one v2 group that a group of another controller made, and removes."""

    controller = ""  # what a subclass limits: the controller :meth:`create` gives its groups

    def __init__(self, path: str, owned: bool = True):
        self.path = path
        self.owned = owned

    @classmethod
    def create(cls: type[_G], root: str, version: str, name: str, *limits: object,
               joined: "tuple[Group | None, ...]" = ()) -> _G:
        """A new group ``cls(path, version, *limits, owned=...)`` with its limits written: on v2 in the replica's
        one group among ``joined`` where it has one (a process is in one v2 group); raises ``OSError`` when the
        host refuses, leaving nothing of its own behind."""
        one = next((g.path for g in joined if g is not None and getattr(g, "version", None) == V2), None)
        path = group_for(root, version, cls.controller, name, one)
        group = cls(path, version, *limits, owned=path != one)
        try:
            group.apply_limit()
        except OSError:
            group.remove()
            raise
        return group

    def apply_limit(self) -> None:
        """Write the group's limits; a plain group has none."""

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run so that it joins this group first (see ``_SHIM``)."""
        return wrap(argv, [self])

    def pids(self) -> list[int]:
        return [int(p) for p in read(self._file("cgroup.procs")).split()]

    def remove(self, timeout: float = 5.0) -> bool:
        """Remove the group (not one it does not own: its maker will); returns whether it is gone. Never raises.

        Call once the tree is reaped. The kernel may still count a process that
        has just exited (EBUSY) for a moment, over a second on a loaded host
        (seen in CI), so retry for a while; anything still
        listed in the group after that is killed, since it can only be ours.
        """
        if not self.owned:
            return True
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


def wrap(argv: list[str], groups: "tuple[Group, ...] | list[Group]") -> list[str]:
    """``argv`` run so that it joins each of ``groups`` first (see ``_SHIM``); as it is with none. A v2 host has
    one group a replica, whatever its limits: joined once."""
    files = list(dict.fromkeys(os.path.join(g.path, "cgroup.procs") for g in groups))
    return [SHELL, "-c", _SHIM, "sh", *files, "--", *argv] if files else argv


_G = TypeVar("_G", bound=Group)


def group_for(root: str, version: str, controller: str, name: str, one: str | None = None) -> str:
    """The folder of a replica's new group of ``controller``: on v2 ``one``, the replica's one v2 group, where it
    has one (with the controller enabled for it), else a new group ``name``; raises ``OSError`` when the host
    refuses."""
    if version == V2 and one is not None:
        enable(os.path.dirname(one), controller)
        return one
    return new_group(place(root, version, controller), name)


def new_group(parent: str, name: str) -> str:
    """A new group named ``name`` in ``parent`` (made if need be, with the empty groups of dead launchers in it
    swept); raises ``OSError`` when the host refuses."""
    os.makedirs(parent, exist_ok=True)
    readable(parent)
    sweep(parent)
    name = name.replace("/", "_").lstrip(".") or "replica"
    path = os.path.join(parent, name)
    try:
        os.mkdir(path)
    except FileExistsError:  # a relaunch of the same replica while the old group still holds processes
        path = f"{path}-{os.getpid()}"
        os.mkdir(path)
    readable(path)
    return path


def readable(path: str) -> None:
    """``path`` open to read, as a host's own groups are, for a job run as another account: the server's umask
    (077) would shut it, and the first launcher to make ``trainyard`` decide for all."""
    try:
        os.chmod(path, 0o755)
    except OSError:  # a parent someone else made and owns: theirs to open
        pass


def place(root: str, version: str, controller: str) -> str:
    """The folder our groups of ``controller`` go in (on v2 made, with the controller enabled for them)."""
    if version == V1:
        return v1_parent(root, controller)
    parent = os.path.join(root, PARENT)
    os.makedirs(parent, exist_ok=True)
    readable(parent)
    enable(parent, controller)
    return parent


def enable(parent: str, controller: str) -> None:
    """Give the cgroup v2 groups in ``parent`` the ``controller``; v2 has no ``devices`` one to give (a device
    program on the group does its work: launch.devices)."""
    if controller != "devices" and controller not in read(os.path.join(parent, "cgroup.subtree_control")).split():
        write(os.path.join(parent, "cgroup.subtree_control"), f"+{controller}")


class MemoryGroup(Group):
    """One replica's memory cgroup: :meth:`make` it, start the command through
    :meth:`wrap`, ask :meth:`oom_kills` while it runs, :meth:`remove` it at the end."""

    controller = "memory"

    def __init__(self, path: str, version: str, limit: int, owned: bool = True):
        super().__init__(path, owned)
        self.version = version
        self.limit = limit

    @classmethod
    def make(cls, root: str, version: str, name: str, limit: int) -> "MemoryGroup":
        """Create the group with its limit; raises ``OSError`` when the host refuses."""
        return cls.create(root, version, name, limit)

    def apply_limit(self) -> None:
        """Write :attr:`limit` to the group (a seat's group is made without one: launch.seat)."""
        if self.version == V1:
            # memory first: memsw may never be below it, and a new group starts unlimited
            write(self._file("memory.limit_in_bytes"), str(self.limit))
            if os.path.exists(self._file("memory.memsw.limit_in_bytes")):
                write(self._file("memory.memsw.limit_in_bytes"), str(self.limit))
            else:  # no swap accounting (swapaccount=0): keep the group from swapping at all
                write(self._file("memory.swappiness"), "0", optional=True)
        else:
            write(self._file("memory.max"), str(self.limit))
            write(self._file("memory.swap.max"), "0", optional=True)  # absent without swap support
            write(self._file("memory.oom.group"), "1", optional=True)  # absent before Linux 4.19

    def oom_kills(self) -> int | None:
        """How many processes the kernel's OOM killer killed in the group; None if the kernel does not say."""
        text = read(self._file("memory.oom_control" if self.version == V1 else "memory.events"))
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
        return returncode == -signal.SIGKILL and int(read(self._file("memory.failcnt")) or 0) > 0

    def oom_message(self) -> str:
        """What the replica's end says of an OOM kill in the group."""
        peak = self.peak()
        return (f"the kernel's OOM killer stopped it at the memory limit of {mib(self.limit)}"
                f" ({self.version}{f', peak {mib(peak)}' if peak else ''})")

    def peak(self) -> int | None:
        """The group's highest memory use, in bytes, where the kernel keeps it."""
        text = read(self._file("memory.max_usage_in_bytes" if self.version == V1 else "memory.peak"))
        return int(text) if text.strip().isdigit() else None


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


class SayOnce:
    """Say a line on the launcher's own log (its stderr) the first time only: what this host lacks, it lacks for
    every replica the launcher starts."""

    def __init__(self) -> None:
        self.said = False

    def __call__(self, text: str) -> None:
        if not self.said:
            self.said = True
            print(text, file=sys.stderr, flush=True)


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


def read(path: str) -> str:
    """A cgroup file's text; "" where it is not there or cannot be read."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def write(path: str, value: str, optional: bool = False) -> None:
    """Write a cgroup file; ``optional``: a knob this kernel lacks or refuses is left as it is."""
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError:  # optional: a knob this kernel lacks or refuses leaves the limit itself in place
        if not optional:
            raise
