"""What replicas use (from the launcher's ``system/…`` samples), idle GPUs, and status events.

Samples arrive as metric lines; :meth:`UsageMixin._record_usage` folds each
report's into one ``replica_usage`` row (latest, peak, sums for a mean), in the
report's own transaction, and flags the job there when its GPUs have stayed
under the threshold for the period: no timer, no extra query per report.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from sqlalchemy import insert, select, update

from trainyard.auth.permissions import Visible
from trainyard.errors import JobNotFound
from trainyard.spec.monitoring import EventInfo, ReplicaUsageInfo
from trainyard.status import AttemptStatus, JobStatus, Reason
from trainyard.store import tables as t
from trainyard.store import usage_tables as ut
from trainyard.store.job_list import visible_where

PREFIX = "system/"  # as trainyard.launch.sampling writes them
ACTIVE = (AttemptStatus.STARTING.value, AttemptStatus.RUNNING.value)


class IdleRule(NamedTuple):
    threshold: float = 5.0  # GPU utilisation (%) under which GPUs count as idle
    period: float = 1800.0  # seconds they must stay idle before the job is flagged


def idle_text(rule: IdleRule) -> str:
    minutes = rule.period / 60
    span = f"{minutes:g} min" if minutes >= 1 else f"{rule.period:g} s"
    return f"GPUs idle: utilisation under {rule.threshold:g} % for {span}"


class UsageMixin:
    idle_rule: IdleRule = IdleRule()

    # -- samples ---------------------------------------------------------------

    def _record_usage(self, s, attempt: t.Attempt, replica: int, rows: list[t.Metric]) -> None:  # noqa: ANN001
        samples: dict[float, dict[str, float]] = {}
        for m in rows:
            if m.name.startswith(PREFIX):
                samples.setdefault(m.ts, {})[m.name[len(PREFIX):]] = m.value
        if not samples:
            return
        u = t.ReplicaUsage.__table__
        c = u.c
        key = (c.attempt_id == attempt.id, c.replica == replica)
        row = s.connection().execute(select(u).where(*key)).mappings().first()
        state: dict[str, Any] = dict(row) if row else dict(
            attempt_id=attempt.id, replica=replica, job_id=attempt.job_id, samples=0, cpu_percent=None,
            memory_bytes=None, peak_memory_bytes=None, gpu_util=None, gpu_memory_bytes=None, gpu_util_sum=0.0,
            gpu_samples=0, gpu_low_since=None, idle_flagged_at=None, updated_at=0.0)
        rule = self.idle_rule
        for ts in sorted(samples):
            v = samples[ts]
            state["samples"] += 1
            state["updated_at"] = ts
            if "cpu_percent" in v:
                state["cpu_percent"] = v["cpu_percent"]
            if "memory_bytes" in v:
                mem = int(v["memory_bytes"])
                state["memory_bytes"] = mem
                state["peak_memory_bytes"] = max(mem, state["peak_memory_bytes"] or 0)
            if "gpu_util" in v:
                util = v["gpu_util"]
                state["gpu_util"] = util
                state["gpu_memory_bytes"] = int(v.get("gpu_memory_bytes", 0))
                state["gpu_util_sum"] += util
                state["gpu_samples"] += 1
                state["gpu_low_since"] = (state["gpu_low_since"] or ts) if util < rule.threshold else None
        low = state["gpu_low_since"]
        newly_idle = (low is not None and state["updated_at"] - low >= rule.period
                      and state["idle_flagged_at"] is None)
        if newly_idle:
            state["idle_flagged_at"] = time.time()
        if row:
            s.connection().execute(update(u).where(*key).values(
                {k: v for k, v in state.items() if k not in ("attempt_id", "replica", "job_id")}))
        else:
            s.connection().execute(insert(u), [state])
        if newly_idle:
            self._flag_idle(s, attempt.job_id, rule)

    def _flag_idle(self, s, job_id: str, rule: IdleRule) -> None:  # noqa: ANN001
        """Say so on the job; cancel it when its queue asks for that."""
        text = idle_text(rule)
        j, q = t.Job.__table__.c, t.Queue.__table__.c
        action = s.connection().execute(select(q.idle_gpu_action).join_from(
            t.Job.__table__, t.Queue.__table__, q.name == j.queue).where(j.id == job_id)).scalar()
        if action == "cancel":
            if self._cas(s, t.Job, job_id, JobStatus.CANCELLING,  # type: ignore[attr-defined]
                         reason=f"{text}: cancelled (queue's idle_gpus action)", status_by="system"):
                a = t.Attempt.__table__.c
                s.connection().execute(update(t.Attempt.__table__).where(
                    a.job_id == job_id, a.status.in_(ACTIVE), a.stop_reason.is_(None))
                    .values(stop_reason=Reason.CANCELLED.value))
            return
        s.connection().execute(update(t.Job.__table__).where(
            j.id == job_id, j.status.in_([JobStatus.STARTING.value, JobStatus.RUNNING.value])).values(reason=text))

    def job_usage(self, job_id: str) -> list[ReplicaUsageInfo]:
        """What each replica of each attempt used, oldest attempt first."""
        u, a = t.ReplicaUsage.__table__.c, t.Attempt.__table__.c
        with self.read() as s:  # type: ignore[attr-defined]
            self._require_job(s, job_id)
            rows = s.connection().execute(
                select(t.ReplicaUsage.__table__, a.number).join_from(
                    t.ReplicaUsage.__table__, t.Attempt.__table__, a.id == u.attempt_id)
                .where(u.job_id == job_id).order_by(a.number, u.replica)).mappings().all()
        return [ReplicaUsageInfo(
            attempt=r["number"], replica=r["replica"], samples=r["samples"], cpu_percent=r["cpu_percent"],
            memory_bytes=r["memory_bytes"], peak_memory_bytes=r["peak_memory_bytes"], gpu_util=r["gpu_util"],
            gpu_memory_bytes=r["gpu_memory_bytes"],
            mean_gpu_util=r["gpu_util_sum"] / r["gpu_samples"] if r["gpu_samples"] else None,
            idle_since=r["gpu_low_since"], idle_flagged_at=r["idle_flagged_at"]) for r in rows]

    # -- events ----------------------------------------------------------------

    def events(self, kind: str, object_id: str) -> list[EventInfo]:
        """Every status change of a job (``kind`` "job") or pipeline run ("pipeline_run"), oldest first."""
        e = t.Event.__table__.c
        with self.read() as s:  # type: ignore[attr-defined]
            if kind == "job":
                self._require_job(s, object_id)
            rows = s.connection().execute(select(e.ts, e.old_status, e.new_status, e.reason, e.actor).where(
                e.kind == kind, e.object_id == object_id).order_by(e.id)).all()
        return [EventInfo(ts=ts, old_status=old, new_status=new, reason=reason, actor=actor)
                for ts, old, new, reason, actor in rows]

    def _require_job(self, s, job_id: str) -> None:  # noqa: ANN001
        if s.connection().execute(select(t.Job.__table__.c.id).where(t.Job.__table__.c.id == job_id)).first() is None:
            raise JobNotFound(f"no such job: {job_id}", job_id=job_id)


class Span(NamedTuple):
    """How long one attempt held what its job asks for, with what to group it by."""

    queue: str
    team: str  # the queue's team; on a queue of no team (the default queue), the job's (its submitter's); else the queue
    user: str
    resources: dict[str, Any]  # the spec's resources, as stored
    replicas: int
    node: str | None
    status: str
    reason: str | None
    start: float
    end: float


class SpansMixin:
    def attempt_spans(self, since: float, until: float, visible: Visible | None = None) -> list[Span]:
        """Attempts that held resources between ``since`` and ``until``, clipped to that window.
        An attempt holds its job's resources from admission (its creation) to its end, or
        ``until`` while it runs. With ``visible``, only attempts of jobs a listing would show."""
        a, j, q = t.Attempt.__table__.c, t.Job.__table__.c, t.Queue.__table__.c
        seen = [visible_where(j, visible)] if visible is not None and visible.teams is not None else []
        with self.read() as s:  # type: ignore[attr-defined]
            rows = s.connection().execute(
                select(j.queue, q.team, j.team, j.owner, j.spec, a.node, a.status, a.reason, a.created_at,
                       a.ended_at)
                .join_from(t.Attempt.__table__, t.Job.__table__, j.id == a.job_id)
                .outerjoin(t.Queue.__table__, q.name == j.queue)
                .where(a.created_at < until, (a.ended_at.is_(None)) | (a.ended_at > since), *seen)).all()
        spans = []
        for queue, queue_team, team, owner, spec, node, status, reason, created, ended in rows:
            start, end = max(created, since), min(ended if ended is not None else until, until)
            if end > start:
                # "user": the submitter (owner); "-" for jobs from before it was recorded (migration 0005)
                spans.append(Span(queue, queue_team or team or queue, owner or "-", dict(spec.get("resources") or {}),
                                  int(spec.get("replicas") or 1), node, status, reason, start, end))
        return spans + self._archived_spans(since, until, visible)

    def _archived_spans(self, since: float, until: float, visible: Visible | None) -> list[Span]:
        """The attempts of deleted jobs (:mod:`trainyard.store.deletion`), as they were counted before."""
        u = ut.UsageArchive.__table__.c
        seen = [visible_where(u, visible)] if visible is not None and visible.teams is not None else []
        with self.read() as s:  # type: ignore[attr-defined]
            rows = s.connection().execute(
                select(u.queue, u.queue_team, u.team, u.owner, u.resources, u.replicas, u.node, u.status, u.reason,
                       u.created_at, u.ended_at).where(u.created_at < until, u.ended_at > since, *seen)).all()
        return [Span(queue, queue_team or team or queue, owner or "-", dict(resources or {}), replicas, node, status,
                     reason, max(created, since), min(ended, until))
                for queue, queue_team, team, owner, resources, replicas, node, status, reason, created, ended in rows
                if min(ended, until) > max(created, since)]
