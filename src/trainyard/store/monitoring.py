"""The aggregates ``/metrics`` is made of: a handful of GROUP BY queries, whatever the number of jobs.

A scrape must stay cheap with ten thousand jobs in the store, so nothing here
reads rows one by one: the database counts, sums and buckets.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import case, func, select

from trainyard.status import AttemptStatus
from trainyard.store import tables as t
from trainyard.store import usage_tables as ut

ACTIVE = (AttemptStatus.STARTING.value, AttemptStatus.RUNNING.value)
# attempts, and the archived attempts of deleted jobs: the same columns, counted alike
_ATTEMPT_TABLES = (t.Attempt.__table__.c, ut.UsageArchive.__table__.c)
ENDED = (AttemptStatus.SUCCEEDED.value, AttemptStatus.FAILED.value, AttemptStatus.CANCELLED.value)


class Waits(NamedTuple):
    """Admission waits of one queue: cumulative counts per bucket bound, their sum and count."""

    buckets: list[int]
    total: float
    count: int


class Outcomes(NamedTuple):
    ended: list[tuple[str, str | None, int]]  # (queue, reason as stored, attempts)
    preempted: dict[str, int]  # queue -> attempts


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
        """Per queue, how long jobs waited from submission to their first admission (as Kueue's
        admission wait time: a retry or requeue is not a new wait). One CASE per row picks its
        bucket; the cumulative counts are summed here over the few (queue, bucket) groups. Deleted
        jobs' attempts count from their archive (:mod:`trainyard.store.usage_tables`)."""
        out: dict[str, Waits] = {}
        with self.read() as s:  # type: ignore[attr-defined]
            for a in _ATTEMPT_TABLES:
                bucket = case(*[(a.wait <= b, i) for i, b in enumerate(bounds)], else_=len(bounds))
                q = (select(a.queue, bucket, func.count(), func.sum(a.wait))
                     .where(a.wait.is_not(None)).group_by(a.queue, bucket))
                for queue, i, n, total in s.connection().execute(q):
                    w = out.setdefault(queue, Waits([0] * len(bounds), 0.0, 0))
                    for k in range(int(i), len(bounds)):
                        w.buckets[k] += int(n)
                    out[queue] = w._replace(total=w.total + float(total or 0.0), count=w.count + int(n))
        return out

    def attempt_outcomes(self) -> Outcomes:
        """Ended attempts per queue and reason as stored, and preempted attempts (told to stop to
        make room, ended or not) per queue: one pass over the attempts (and the archived ones of
        deleted jobs), no join."""
        out = Outcomes([], {})
        with self.read() as s:  # type: ignore[attr-defined]
            for a in _ATTEMPT_TABLES:
                ended = a.status.in_(ENDED)
                preempted = a.preempted_by.is_not(None)
                q = select(a.queue, a.reason, ended, preempted, func.count()).group_by(a.queue, a.reason, ended,
                                                                                      preempted)
                for queue, reason, is_ended, is_preempted, n in s.connection().execute(q):
                    if is_ended:
                        out.ended.append((queue, reason, int(n)))
                    if is_preempted:
                        out.preempted[queue] = out.preempted.get(queue, 0) + int(n)
        return out

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
