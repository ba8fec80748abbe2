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

A move into a group costs the start 10-15 ms (launch.seat), and every job asks for some cores: the weight alone
is not worth that to a job that joins no other group. Measured on the CI host (v1, the shim run 40 times each,
medians): no group 2.3 ms, the cpu group alone 12.7 ms, pids 12.7 ms and pids+cpu 11.2 ms, memory+pids 13.7 ms
and all three 10.2 ms: the wait is the first move's, one more ``echo`` in the same shim is lost in the noise.
So a replica gets its cpu group where it joins a memory or pids group anyway, where its seat holds one, or
where ``cpu_limit`` is on (an admin's choice, as ``pids_max`` is). A one-user server's jobs without a memory
limit thus share the cores as plain processes do.
"""

from __future__ import annotations

from trainyard.launch import cgroup
from trainyard.launch.cgroup import MOUNT, V1

SHARES_MIN, SHARES_MAX = 2, 262144  # the kernel's bounds for cpu.shares (v1)
PERIOD = 100_000  # µs: the kernel's default CFS period (and Kubernetes'), for cpu.max on v2
QUOTA_MIN = 1000  # µs: the least quota the kernel takes

_say = cgroup.SayOnce()  # "cannot make a cpu cgroup": once a launcher, on its own log


def shares(cpu: float) -> int:
    """v1 ``cpu.shares`` for ``cpu`` cores, as Kubernetes computes them from millicores."""
    return min(SHARES_MAX, max(SHARES_MIN, round(cpu * 1000) * 1024 // 1000))


def weight(cpu: float) -> int:
    """v2 ``cpu.weight`` (1..10000) for ``cpu`` cores: Kubernetes' map of its shares, so both hosts agree."""
    return 1 + (shares(cpu) - 2) * 9999 // 262142


def quota(cpu: float, period: int = PERIOD) -> int:
    """µs a ``period`` that ``cpu`` cores may run."""
    return max(QUOTA_MIN, round(cpu * period))


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
        ``joined`` where it has one; raises ``OSError`` when the host refuses."""
        return cls.create(root, version, name, cpu, hard, joined=joined)

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
