"""A replica's cores: its whole tree in a cpu cgroup weighted by ``resources.cpu``, and capped at it on request.

The scheduler counts ``resources.cpu`` against a node's cores, but nothing held a job to it: one that asked for
a core and ran 32 busy threads took the node from every other job on it. As Kubernetes does with a pod's cpu
request, the replica's tree runs in a cpu cgroup whose weight is proportional to what it asked: under
contention the kernel's scheduler gives each group its share, and a job may still use cores nobody else wants.
With the server's ``cpu_limit`` on, the group gets a CFS quota of ``cpu`` cores per period too (a Kubernetes
limit, Slurm's ConstrainCores in time rather than in cores): never more, even on an idle node. Made, joined,
removed and swept as the memory group is (:mod:`trainyard.launch.cgroup`).

- ``cgroup-v1``: ``<root>/cpu`` is the v1 cpu controller (alone or as ``cpu,cpuacct``) and we may create groups
  in it (root). The group is ``<root>/cpu/<our group>/trainyard/<attempt>-r<replica>`` with ``cpu.shares``
  1024 a core (the kernel's 2..262144), and with ``cpu_limit`` ``cpu.cfs_quota_us`` (cores x the period).
- ``cgroup-v2``: ``<root>/cgroup.controllers`` lists ``cpu``, enabled for our groups as memory is: ``cpu.weight``
  from those shares as Kubernetes maps them, and with ``cpu_limit`` ``cpu.max``, in the replica's one group.
- anything else (no controller, not root, a delegated tree without ``cpu``): nothing, said nowhere; the node's
  jobs share its cores as processes do.

All of a node's cpu groups sit in one parent, ``trainyard``, and at its level the kernel weighs that parent
against its siblings: a node agent's group, another tenant's, each busy process there. At the kernel's default
weight (1024 shares, weight 100) all the node's jobs together got one core's worth against any one of them.
As Kubernetes weighs ``kubepods`` by the node's allocatable cores, the parent gets the weight of the node's
cores (:func:`weigh_parent`): 1024 shares a core on v1, Kubernetes' map of those on v2 (never below the
default 100, which that map puts above 1-2 cores' weight). Written once a launcher, by the first group it makes
(ahead, in its seat, where it has one), and only over the kernel's default: a weight someone else set is theirs,
and kept (ours from before the node's cores changed too: written back to the default, the next launcher
rewrites it). Where we may not write it (not root; a v2 tree delegated to us, its delegator's): as it was.

A move into a group costs the start 10-15 ms (launch.seat), and every job asks for some cores: the weight alone
is not worth that to a job that joins no other group. Measured on the CI host (v1, the shim run 40 times each,
medians): no group 2.3 ms, the cpu group alone 12.7 ms, pids 12.7 ms and pids+cpu 11.2 ms, memory+pids 13.7 ms
and all three 10.2 ms: the wait is the first move's, one more ``echo`` in the same shim is lost in the noise.
So a replica gets its cpu group where it joins a memory or pids group anyway, where its seat holds one, or
where ``cpu_limit`` is on (an admin's choice, as ``pids_max`` is). A one-user server's jobs without a memory
limit thus share the cores as plain processes do.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from trainyard.launch import cgroup
from trainyard.launch.cgroup import MOUNT, PARENT, V1

SHARES_MIN, SHARES_MAX = 2, 262144  # the kernel's bounds for cpu.shares (v1)
PERIOD = 100_000  # µs: the kernel's default CFS period (and Kubernetes'), for cpu.max on v2
QUOTA_MIN = 1000  # µs: the least quota the kernel takes
SHARES_DEFAULT, WEIGHT_DEFAULT = 1024, 100  # what the kernel gives a new group (v1, v2)

_say = cgroup.SayOnce()  # "cannot make a cpu cgroup": once a launcher, on its own log
# (root, version, pid) whose parent this launcher saw to: one read, not one a start. The pid: a launcher forked
# by the zygote after its own check looks once more (the parent may have been put back to the default since)
_weighed: set[tuple[str, str, int]] = set()


def shares(cpu: float) -> int:
    """v1 ``cpu.shares`` for ``cpu`` cores, as Kubernetes computes them from millicores."""
    return min(SHARES_MAX, max(SHARES_MIN, round(cpu * 1000) * 1024 // 1000))


def weight(cpu: float) -> int:
    """v2 ``cpu.weight`` (1..10000) for ``cpu`` cores: Kubernetes' map of its shares, so both hosts agree."""
    return 1 + (shares(cpu) - 2) * 9999 // 262142


def quota(cpu: float, period: int = PERIOD) -> int:
    """µs a ``period`` that ``cpu`` cores may run."""
    return max(QUOTA_MIN, round(cpu * period))


def cores() -> int:
    """The node's cores as its jobs see them: the launcher's affinity, which they inherit, and what the node reports
    to the scheduler (engines.detect); fewer than ``os.cpu_count()`` in a container given a cpuset, whose other
    cores no job here can run on, so they are not worth weighing for."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux (no cgroups either; doctor asks all the same)
        return os.cpu_count() or 1


class ParentWeight(NamedTuple):
    """Our parent group's weight file, the kernel's default there, and the weight of the node's cores."""

    path: str
    default: int
    node: int


def parent_weight(root: str, version: str) -> ParentWeight | None:
    """Where the parent of our groups under ``root`` keeps its weight, and what it should be; None in a v2 tree
    delegated to us (the launcher runs inside it), whose weight is its delegator's."""
    n = cores()
    if version == V1:
        return ParentWeight(os.path.join(cgroup.v1_parent(root, "cpu"), "cpu.shares"), SHARES_DEFAULT, shares(n))
    if cgroup.own_v2_path().startswith(f"/{PARENT}/"):
        return None
    # Kubernetes' map gives 1-2 cores less than the 100 every sibling has: the jobs would weigh less than they did
    return ParentWeight(os.path.join(root, PARENT, "cpu.weight"), WEIGHT_DEFAULT, max(WEIGHT_DEFAULT, weight(n)))


def weigh_parent(root: str, version: str) -> None:
    """Give the parent of our groups the weight of the node's cores where it has the kernel's default (see the
    module's docstring), once a launcher: call it once a group is made in it. Never raises."""
    key = (root, version, os.getpid())
    if key in _weighed:
        return
    _weighed.add(key)
    found = parent_weight(root, version)
    if found is None or found.node == found.default or cgroup.read(found.path).strip() != str(found.default):
        return
    try:
        cgroup.write(found.path, str(found.node))
    except OSError:  # not ours to write (not root): the jobs weigh together as they did
        pass


def parent_said(root: str, version: str) -> str:
    """What doctor says of the weight of our parent group under ``root``."""
    found = parent_weight(root, version)
    if found is None:
        return "all its jobs together weigh as the delegator of their tree set it"
    now, knob = cgroup.read(found.path).strip(), os.path.basename(found.path)
    if now in ("", str(found.default), str(found.node)):  # the first launch writes it
        return f"all its jobs together weigh as its {cores()} cores ({knob} {found.node}, as kubepods does)"
    return f"all its jobs together keep the {knob} {now} someone else gave their parent (its cores': {found.node})"


def detect(root: str = MOUNT) -> str | None:
    """How this host can weigh (and cap) a replica's cores: ``V1``, ``V2``, or None where it cannot."""
    return cgroup.detect_controller(root, "cpu", "cpu.shares")


def wanted(config: object, joined: bool) -> bool:
    """Whether a replica of ``config`` goes in a cpu group: it asked for cores, and ``cpu_limit`` is on or it
    joins another group anyway (``joined``; see the module's docstring on the cost of a move)."""
    return getattr(config, "cpu", None) is not None and (bool(getattr(config, "cpu_limit", False)) or joined)


class CpuGroup(cgroup.Group):
    """One replica's cpu cgroup: :meth:`make` it, start the command through :func:`trainyard.launch.cgroup.wrap`
    with its other groups, :meth:`remove` it at the end. ``owned``: False where it is the replica's v2 group
    of another controller, which removes itself."""

    controller = "cpu"

    def __init__(self, path: str, version: str, cpu: float, hard: bool, owned: bool = True):
        super().__init__(path, owned)
        self.version = version
        self.cpu = cpu
        self.hard = hard

    @classmethod
    def make(cls, root: str, version: str, name: str, cpu: float, hard: bool,
             joined: "tuple[cgroup.Group | None, ...]" = ()) -> "CpuGroup":
        """Create the group with its weight (and quota where ``hard``): on v2 in the replica's one group among
        ``joined`` where it has one, and its parent weighed (:func:`weigh_parent`); raises ``OSError`` when the
        host refuses."""
        group = cls.create(root, version, name, cpu, hard, joined=joined)
        weigh_parent(root, version)
        return group

    def apply_limit(self) -> None:
        """Write the weight, and the quota where :attr:`hard` (a seat's group is made without: launch.seat)."""
        if self.version == V1:
            cgroup.write(self._file("cpu.shares"), str(shares(self.cpu)))
            if self.hard:
                period = cgroup.read(self._file("cpu.cfs_period_us")).strip()
                cgroup.write(self._file("cpu.cfs_quota_us"),
                             str(quota(self.cpu, int(period) if period.isdigit() else PERIOD)))
        else:
            cgroup.write(self._file("cpu.weight"), str(weight(self.cpu)))
            if self.hard:
                cgroup.write(self._file("cpu.max"), f"{quota(self.cpu)} {PERIOD}")


def for_replica(root: str | None, config: object, name: str,
                joined: "tuple[cgroup.Group | None, ...]" = ()) -> CpuGroup | None:
    """The replica's cpu cgroup under ``root`` for the cores and ``cpu_limit`` of ``config``, or None: not
    :func:`wanted` beside the groups it ``joined``, or none to be had here (silent: most hosts without one
    are a user's own machine, where sharing the cores as processes do is what its jobs did all along)."""
    if not root or not wanted(config, any(g is not None for g in joined)):
        return None
    mode = detect(root)
    if mode is None:
        return None
    try:
        return CpuGroup.make(root, mode, name, config.cpu, bool(config.cpu_limit), joined)
    except OSError as e:  # the host looked able and refused: worth a line, once
        _say(f"trainyard: cannot make a cpu cgroup ({mode}): {e}; jobs here share the cores as processes do")
        return None
