"""A replica's process limit: its whole tree in a pids cgroup, so that a fork bomb stops at the replica.

A job that forks without end (a shell loop, a data loader that starts workers in a loop) would take every
pid of the node, and with them the server's and every other job's ability to start a process. The kernel's
pids controller counts a group's processes and threads, and makes a ``fork``/``clone`` past ``pids.max``
fail (EAGAIN) in that group alone. Made as the memory group is (:mod:`trainyard.launch.cgroup`): right
before the spawn, joined by the command through the same shim before it runs anything of its own (or
made while the launcher waited for its attempt, with the command's process-to-be in it: launch.seat),
removed once the tree is reaped, swept when a dead launcher left it behind.

- ``cgroup-v1``: ``<root>/pids`` is the v1 pids controller and we may create groups in it (root). The
  group is ``<root>/pids/<our group>/trainyard/<attempt>-r<replica>`` with ``pids.max``.
- ``cgroup-v2``: ``<root>/cgroup.controllers`` lists ``pids``, enabled for our groups as memory is. A
  process is in one v2 group: ``pids.max`` goes in the memory group where the replica has one.
- anything else: no limit; the launcher says so once on its own log (``launcher.log``) and goes on.

Forks refused at the limit are the ``max`` line of the group's ``pids.events``: v2's, and v1's too (the v1
controller has no failcnt, and has the same events file on the kernels this runs on, CI's included). Where a
kernel has none, the end of a replica says nothing of the limit. The group, its ``pids.max`` and its
``cgroup.procs`` are root's, as the memory group's: a job run as an account (``run_as``) can neither raise
its limit nor move itself out.
"""

from __future__ import annotations

from trainyard.launch import cgroup
from trainyard.launch.cgroup import MOUNT

_say = cgroup.SayOnce()  # "no pids cgroup here": once a launcher, on its own log


def detect(root: str = MOUNT) -> str | None:
    """How this host can enforce a replica's process limit: ``V1``, ``V2``, or None where it cannot."""
    return cgroup.detect_controller(root, "pids", "cgroup.procs")  # v1's root has no pids.max of its own


class PidsGroup(cgroup.Group):
    """One replica's pids cgroup: :meth:`make` it, start the command through :func:`trainyard.launch.cgroup.wrap`
    with its other groups, ask :meth:`refused` once it ended, :meth:`remove` it at the end. ``owned``: False
    where it is the replica's memory group (v2), which removes itself."""

    controller = "pids"

    def __init__(self, path: str, version: str, limit: int, owned: bool = True):
        super().__init__(path, owned)
        self.version = version
        self.limit = limit

    @classmethod
    def make(cls, root: str, version: str, name: str, limit: int,
             memory: cgroup.MemoryGroup | None = None) -> "PidsGroup":
        """Create the group with its limit (in ``memory``, the replica's v2 memory group, where it has one);
        raises ``OSError`` when the host refuses."""
        return cls.create(root, version, name, limit, joined=(memory,))

    def apply_limit(self) -> None:
        """Write :attr:`limit` to the group (a seat's group is made without one: launch.seat)."""
        cgroup.write(self._file("pids.max"), str(self.limit))

    def refused(self) -> int | None:
        """How many forks the kernel refused at the limit; None where it does not say."""
        for line in cgroup.read(self._file("pids.events")).splitlines():
            key, _, value = line.partition(" ")
            if key == "max":
                return int(value)
        return None

    def message(self) -> str:
        """What the end of a replica that failed after a refused fork says."""
        refused = self.refused() or 0
        forks = f"{refused} forks" if refused > 1 else "a fork"
        return (f"the pids limit of {self.limit} processes was reached ({self.version}, the server's pids_max): "
                f"{forks} failed with EAGAIN")


def for_replica(root: str | None, limit: int | None, name: str,
                memory: cgroup.MemoryGroup | None = None) -> PidsGroup | None:
    """The replica's pids cgroup under ``root`` with ``limit``, or None: no limit, or none to be had here
    (said once on the launcher's own log)."""
    if not limit or not root:
        return None
    mode = detect(root)
    if mode is None:
        _say(f"trainyard: no usable pids cgroup here (root on cgroup v1, or a delegated cgroup v2 tree): "
             f"the limit of {limit} processes a replica is not enforced")
        return None
    try:
        return PidsGroup.make(root, mode, name, limit, memory)
    except OSError as e:
        _say(f"trainyard: cannot make a pids cgroup ({mode}): {e}; the limit of {limit} processes is not enforced")
        return None
