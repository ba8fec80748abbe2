"""The planner's view of a cluster: plain slotted dataclasses, nothing else.

:func:`trainyard.scheduler.plan.plan` reads tens of thousands of these every
cycle; pydantic validation would cost more than the decision, so the hot path
uses these and :mod:`trainyard.scheduler.adapter` builds them from records.
Memory is in bytes, CPU in cores, times in seconds since the epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

INF = float("inf")


@dataclass(slots=True)
class Node:
    """Allocatable resources of one node, and what running attempts leave free.

    The free amounts already exclude every running attempt, stopping ones
    included: a preempted attempt holds its resources until it has exited.
    Left as None, they mean "all free".
    """

    name: str
    cpu: float
    memory: int
    gpus: int = 0
    gpu_type: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    cpu_free: float | None = None
    memory_free: int | None = None
    free_gpu_ids: list[str] | None = None

    def __post_init__(self) -> None:
        if self.cpu_free is None:
            self.cpu_free = self.cpu
        if self.memory_free is None:
            self.memory_free = self.memory
        if self.free_gpu_ids is None:
            self.free_gpu_ids = [str(i) for i in range(self.gpus)]


@dataclass(slots=True)
class Queue:
    """A named line of jobs owned by a team. A quota of None is unlimited.

    ``gpus`` caps GPUs per type; the key ``"*"`` caps all types together.
    ``max_running`` caps running jobs and is never borrowed past. With
    ``borrowing`` a queue over quota may use capacity nobody else wants now;
    that work is preempted first when a queue within its quota needs room.
    """

    name: str
    team: str = "default"
    priority: int = 0
    cpu: float | None = None
    memory: int | None = None
    gpus: dict[str, int] | None = None
    max_running: int | None = None
    borrowing: bool = True


@dataclass(slots=True)
class PendingJob:
    """One job waiting for an attempt. Every replica asks for the same resources.

    ``gpu_types`` lists acceptable types in order of preference; empty means
    any type. ``timeout`` is what lets a job backfill: only a job that must
    end before a reservation starts may use the reserved room.
    """

    id: str
    queue: str = "default"
    team: str = "default"
    priority: int = 100
    seq: float = 0.0  # submit order; ties keep input order
    submitted_at: float | None = None  # for the fair-share wait bound; None: never overdue
    replicas: int = 1
    cpu: float = 1.0
    memory: int = 0
    gpu: int = 0
    gpu_types: tuple[str, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    placement: str = "pack"  # "pack" | "spread" (spread: each replica on its own node)
    timeout: float | None = None
    preemptible: bool = True
    not_before: float | None = None  # retry backoff: not eligible before this time
    last_preempted_by: str | None = None  # job id; this job never preempts that one back
    last_reason: str | None = None  # why the last attempt ended, for the backoff reason

    def __post_init__(self) -> None:
        if isinstance(self.gpu_types, str):
            self.gpu_types = (self.gpu_types,)
        elif not isinstance(self.gpu_types, tuple):
            self.gpu_types = tuple(self.gpu_types)


@dataclass(slots=True)
class ReplicaUse:
    """What one running replica holds on its node."""

    node: str
    cpu: float
    memory: int
    gpu_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RunningJob:
    """One live attempt. ``stopping`` attempts were told to stop and are exiting.

    ``borrowed`` None (what the loop should pass) lets the planner decide each
    cycle from the queue's quota: work that cannot be preempted counts inside
    it first, then the highest priority, then the oldest; the rest is borrowed.
    """

    attempt_id: str
    job_id: str
    queue: str = "default"
    team: str = "default"
    priority: int = 100
    replicas: list[ReplicaUse] = field(default_factory=list)
    started_at: float = 0.0
    expected_end: float | None = None  # started_at + timeout; None when it has none
    preemptible: bool = True
    borrowed: bool | None = None
    stopping: bool = False


@dataclass(slots=True)
class Assignment:
    """Where one replica runs."""

    node: str
    gpu_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Preemption:
    attempt_id: str
    job_id: str
    by: str  # the pending job that needs the room
    reason: str


@dataclass(slots=True)
class Reservation:
    """Room held for a job at the head of the line; ``start`` INF: not known yet."""

    job_id: str
    nodes: list[str]
    start: float


@dataclass(slots=True)
class Plan:
    """What one planning cycle decided."""

    admissions: dict[str, list[Assignment]] = field(default_factory=dict)  # job id -> one per replica
    borrowed: set[str] = field(default_factory=set)  # admitted beyond their queue's quota
    preemptions: list[Preemption] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # pending job id -> why it waits
    positions: dict[str, int] = field(default_factory=dict)  # pending job id -> jobs ahead in its queue
    reservations: list[Reservation] = field(default_factory=list)


def default_queue(name: str = "default") -> Queue:
    """The queue a job lands in when none is configured: no quotas, its own team."""
    return Queue(name=name, team="default" if name == "default" else name)
