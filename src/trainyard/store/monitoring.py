"""The aggregates ``/metrics`` is made of: a handful of GROUP BY queries, whatever the number of jobs.

A scrape must stay cheap with ten thousand jobs in the store, so nothing here
reads rows one by one: the database counts, sums and buckets.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import aliased

from trainyard.status import AttemptStatus
from trainyard.store import tables as t

ACTIVE = (AttemptStatus.STARTING.value, AttemptStatus.RUNNING.value)
ENDED = (AttemptStatus.SUCCEEDED.value, AttemptStatus.FAILED.value, AttemptStatus.CANCELLED.value)


class Waits(NamedTuple):
    """Admission waits of one queue: cumulative counts per bucket bound, their sum and count."""

    buckets: list[int]
    total: float
    count: int


class RunningUsage(NamedTuple):
    job_id: str
    name: str
    queue: str
    replica: int
    cpu_percent: float | None
    memory_bytes: int | None
    gpu_util: float | None
    gpu_memory_bytes: int | None
    idle: bool


class MonitoringMixin:
    def admission_waits(self, bounds: tuple[float, ...]) -> dict[str, Waits]:
        """Per queue, how long each attempt waited to be admitted: from the job's submission (first
        attempt) or its previous attempt's end (a retry, a requeue after preemption)."""
        a, j = t.Attempt.__table__, t.Job.__table__
        prev = aliased(a)
        wait = a.c.created_at - func.coalesce(prev.c.ended_at, j.c.created_at)
        cols = [func.sum(case((wait <= b, 1), else_=0)) for b in bounds]
        q = (select(j.c.queue, func.count(), func.coalesce(func.sum(wait), 0.0), *cols)
             .select_from(a).join(j, j.c.id == a.c.job_id)
             .outerjoin(prev, and_(prev.c.job_id == a.c.job_id, prev.c.number == a.c.number - 1))
             .group_by(j.c.queue))
        with self.read() as s:  # type: ignore[attr-defined]
            return {queue: Waits([int(x or 0) for x in buckets], float(total), int(n))
                    for queue, n, total, *buckets in s.connection().execute(q)}

    def ended_attempts(self) -> list[tuple[str, str | None, int]]:
        """``(queue, reason as stored, attempts)`` of every ended attempt."""
        a, j = t.Attempt.__table__.c, t.Job.__table__.c
        q = (select(j.queue, a.reason, func.count()).join_from(t.Attempt.__table__, t.Job.__table__, j.id == a.job_id)
             .where(a.status.in_(ENDED)).group_by(j.queue, a.reason))
        with self.read() as s:  # type: ignore[attr-defined]
            return [(queue, reason, int(n)) for queue, reason, n in s.connection().execute(q)]

    def preemptions(self) -> dict[str, int]:
        """Attempts told to stop to make room, per queue (counted once told, ended or not)."""
        a, j = t.Attempt.__table__.c, t.Job.__table__.c
        q = (select(j.queue, func.count()).join_from(t.Attempt.__table__, t.Job.__table__, j.id == a.job_id)
             .where(a.preempted_by.is_not(None)).group_by(j.queue))
        with self.read() as s:  # type: ignore[attr-defined]
            return {queue: int(n) for queue, n in s.connection().execute(q)}

    def oldest_pending(self) -> dict[str, float]:
        """Per queue, when its longest-waiting pending job was submitted."""
        j = t.Job.__table__.c
        q = select(j.queue, func.min(j.created_at)).where(j.status == "pending").group_by(j.queue)
        with self.read() as s:  # type: ignore[attr-defined]
            return {queue: float(ts) for queue, ts in s.connection().execute(q)}

    def running_usage(self) -> list[RunningUsage]:
        """The latest sample of each replica of each live attempt."""
        u, a, j = t.ReplicaUsage.__table__.c, t.Attempt.__table__.c, t.Job.__table__.c
        q = (select(j.id, j.name, j.queue, u.replica, u.cpu_percent, u.memory_bytes, u.gpu_util, u.gpu_memory_bytes,
                    u.idle_flagged_at.is_not(None) & u.gpu_low_since.is_not(None))
             .join_from(t.ReplicaUsage.__table__, t.Attempt.__table__, a.id == u.attempt_id)
             .join(t.Job.__table__, j.id == u.job_id)
             .where(a.status.in_(ACTIVE)).order_by(j.id, u.replica))
        with self.read() as s:  # type: ignore[attr-defined]
            return [RunningUsage(*row[:8], bool(row[8])) for row in s.connection().execute(q)]
