"""The aggregates ``/metrics`` is made of: a handful of GROUP BY queries, whatever the number of jobs.

A scrape must stay cheap with ten thousand jobs in the store, so nothing here
reads rows one by one: the database counts, sums and buckets. Deleted jobs' attempts
count from their sums (:mod:`trainyard.store.archive_counts`), kept as they are deleted.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import case, func, select

from trainyard.status import AttemptStatus
from trainyard.store import archive_counts
from trainyard.store import tables as t
from trainyard.store.archive_counts import ENDED, WAIT_BOUNDS

ACTIVE = (AttemptStatus.STARTING.value, AttemptStatus.RUNNING.value)


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
    def admission_waits(self) -> dict[str, Waits]:
        """Per queue, how long jobs waited from submission to their first admission (as Kueue's
        admission wait time: a retry or requeue is not a new wait), in buckets of :data:`WAIT_BOUNDS`.
        One CASE per row picks its bucket; the cumulative counts are summed here over the few (queue,
        bucket) groups, and over the deleted jobs' sums."""
        a, n_bounds = t.Attempt.__table__.c, len(WAIT_BOUNDS)
        bucket = case(*[(a.wait <= b, i) for i, b in enumerate(WAIT_BOUNDS)], else_=n_bounds)
        q = select(a.queue, bucket, func.count(), func.sum(a.wait)).where(a.wait.is_not(None)).group_by(a.queue, bucket)
        with self.read() as s:  # type: ignore[attr-defined]
            conn = s.connection()
            groups = [*conn.execute(q), *((queue, int(key), n, total) for queue, metric, key, n, total
                                          in archive_counts.read(conn) if metric == "wait")]
        out: dict[str, Waits] = {}
        for queue, i, n, total in groups:
            w = out.setdefault(queue, Waits([0] * n_bounds, 0.0, 0))
            for k in range(int(i), n_bounds):
                w.buckets[k] += int(n)
            out[queue] = w._replace(total=w.total + float(total or 0.0), count=w.count + int(n))
        return out

    def attempt_outcomes(self) -> Outcomes:
        """Ended attempts per queue and reason (as stored; a deleted job's by its kind), and preempted attempts
        (told to stop to make room, ended or not) per queue: one pass over the attempts, no join, and the
        deleted jobs' sums."""
        out = Outcomes([], {})
        a = t.Attempt.__table__.c
        ended, preempted = a.status.in_(ENDED), a.preempted_by.is_not(None)
        q = select(a.queue, a.reason, ended, preempted, func.count()).group_by(a.queue, a.reason, ended, preempted)
        with self.read() as s:  # type: ignore[attr-defined]
            conn = s.connection()
            for queue, reason, is_ended, is_preempted, n in conn.execute(q):
                if is_ended:
                    out.ended.append((queue, reason, int(n)))
                if is_preempted:
                    out.preempted[queue] = out.preempted.get(queue, 0) + int(n)
            for queue, metric, key, n, _ in archive_counts.read(conn):
                if metric == "ended":
                    out.ended.append((queue, key, int(n)))
                elif metric == "preempted":
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
