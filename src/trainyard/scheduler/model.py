"""The planner's view of a cluster: plain slotted dataclasses, nothing else.

:func:`trainyard.scheduler.plan.plan` reads tens of thousands of these every
cycle; pydantic validation would cost more than the decision, so the hot path
uses these and :mod:`trainyard.scheduler.adapter` builds them from records.
Memory is in bytes, CPU in cores, times in seconds since the epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

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
    cordoned: bool = False  # taken out of scheduling by an admin: nothing new is placed here

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
    held: Reservation | None = None  # the last reservation it had while waiting (trainyard.scheduler.backfill)

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
    # stopping for another job (preempted): its share of its queue's quota and cap is that job's. Any other
    # stop (a cancel, a drain, a timeout) keeps it charged to its queue until it has exited: it still runs
    preempted: bool = False
    # when its job was submitted (None: unknown): a job that waited past ``Options.starve_after`` before this
    # attempt started is no victim of priority, else the work it waited hours for is stopped minutes in
    submitted_at: float | None = None


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
    # a job inside its quota may stop borrowed work in its way from then on (Options.reclaim_after), if sooner
    reclaims_at: float | None = None


class Shape(NamedTuple):
    """What every replica of a job asks for, and where: jobs of one shape fit the same nodes.

    A cycle keys its caches on shapes, so a line of thousands of like jobs costs one search."""

    cpu: float
    memory: int
    gpu: int
    gpu_types: tuple[str, ...]
    selector: tuple[tuple[str, str], ...]  # the node selector, sorted
    replicas: int
    placement: str


@dataclass(slots=True, frozen=True)
class ShapeFit:
    """A shape as one cycle sees it: a small id for cache keys, and the GPU types (``(None,)`` for a
    CPU job) some node could hold it on even if the cluster were empty; none: it can never run.
    (A class, not a NamedTuple: it is read field by field for every job, never unpacked or hashed.)"""

    id: int
    types: tuple
    shape: Shape


class Status(str, Enum):
    """What one cycle did with a pending job: the first three place it now; the next two hold room
    for it that comes back as other attempts exit, and the sixth holds nodes for it; the rest leave
    it waiting. :attr:`starting` says which are admissions in the plan."""

    ADMITTED = "admitted"  # placed now, inside its queue's quota
    BACKFILLED = "backfilled"  # placed now, in a gap around the reservation of a job ahead of it
    BORROWED = "borrowed"  # placed now beyond its queue's quota, on room nobody else wanted
    CLAIMED = "claimed"  # holds room that stopping attempts hand back; starts when they have exited
    PREEMPTING = "preempting"  # holds room that the attempts it preempts hand back
    RESERVED = "reserved"  # first in line and blocked: nodes are held for it, later jobs only backfill
    NO_ROOM = "no-room"  # waits for room (a shortfall, a reservation ahead)
    OVER_QUOTA = "over-quota"  # waits for its queue's quota or its cap on running jobs
    IMPOSSIBLE = "impossible"  # no node could hold it even empty: labels, GPU type, size
    BACKOFF = "backoff"  # not eligible yet: a retry waiting out its backoff
    YIELDING = "yielding"  # preempted, and waits until the job that preempted it has started

    @property
    def starting(self) -> bool:
        """Placed now (an admission in the plan), rather than left pending with a reason."""
        return self in _PLACED


_PLACED = frozenset({Status.ADMITTED, Status.BACKFILLED, Status.BORROWED})


@dataclass(slots=True, init=False)
class Entry:
    """What one cycle did with one pending job, as Kueue's scheduler ``entry``: a status and, for a job
    left pending, its message (the reason, also in :attr:`Plan.reasons`). The other fields are what
    the message is built from, set for the statuses named."""

    job: PendingJob
    queue: Queue
    status: Status
    shape: ShapeFit | None  # NO_ROOM, OVER_QUOTA, IMPOSSIBLE, RESERVED: the job's shape as the cycle saw it
    reservation: Reservation | None  # RESERVED: the nodes held for it
    victims: list[str] | None  # PREEMPTING: the jobs whose attempts it stops
    message: str  # why it waits; "" for a job placed now

    # Written out rather than generated: a cycle makes one per pending job, and a generated __init__
    # whose defaults fill the last fields costs half as much again. One store a line: packed into one
    # tuple assignment (or chained) the stores cost nearly twice as much on CPython 3.11.
    def __init__(self, job: PendingJob, queue: Queue, status: Status, shape: ShapeFit | None = None) -> None:
        self.job = job
        self.queue = queue
        self.status = status
        self.shape = shape
        self.reservation = None
        self.victims = None
        self.message = ""


@dataclass(slots=True)
class Plan:
    """What one planning cycle decided."""

    admissions: dict[str, list[Assignment]] = field(default_factory=dict)  # job id -> one per replica
    borrowed: set[str] = field(default_factory=set)  # admitted beyond their queue's quota
    preemptions: list[Preemption] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # pending job id -> why it waits
    positions: dict[str, int] = field(default_factory=dict)  # pending job id -> jobs ahead in its queue
    reservations: list[Reservation] = field(default_factory=list)
    # pending job id -> its entry, every eligible or held-back job: placed ones in admission order, then
    # the rest in line order
    entries: dict[str, Entry] = field(default_factory=dict)
    # room searches for preemption run this cycle (each O(nodes)), and those not run because the bounds on
    # what the job may stop (its total, then node by node) showed it could not make room: why a blocked job
    # stopped nothing, decided without a search
    preempt_searches: int = 0
    preempt_ruled_out: int = 0


def default_queue(name: str = "default") -> Queue:
    """The queue a job lands in when none is configured: no quotas, its own team."""
    return Queue(name=name, team="default" if name == "default" else name)
