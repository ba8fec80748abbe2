"""Deleting ended jobs' records: what may go, what goes, and what is kept of it.

A job goes with everything the server holds of it (attempts, replicas, logs, metrics, resource samples,
output records, status events); what its attempts used moves to ``usage_archive`` in the same transaction,
so neither the usage report nor the counters of ``/metrics`` change. The audit log and webhook deliveries already owed are kept.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import String, and_, cast, delete, insert, not_, select

from trainyard.store import Store, archive_counts
from trainyard.store import request_tables as rq
from trainyard.store import tables as t
from trainyard.store import usage_tables as ut
from trainyard.spec.label_selector import Selector
from trainyard.store.clusters import LIVE as LIVE_CLUSTER
from trainyard.store.job_list import label_where
from trainyard.store.services import LIVE as LIVE_SERVICE
from trainyard.store.store import ENDED, IN_BATCH
from trainyard.store.webhooks import unannounced

_J, _A, _R, _Q = t.Job.__table__, t.Attempt.__table__, t.Replica.__table__, t.Queue.__table__
_STEPS, _TRIALS, _SREPS = t.PipelineStep.__table__, t.SweepTrial.__table__, t.ServiceReplicaRow.__table__
_UA, _SWEEPS = ut.UsageArchive.__table__, t.Sweep.__table__
# rows keyed by the job's id, and by its attempts' ids
_BY_JOB = (t.LogChunk.__table__, t.Metric.__table__, t.Artifact.__table__, t.ReplicaUsage.__table__,
           t.JobLabel.__table__, rq.ReplicaRequest.__table__)
_BY_ATTEMPT = (t.MetricSeries.__table__, _R)
NOT_ANNOUNCED = "its end is not sent to the webhooks yet: try again in a few seconds"


class Deleted(NamedTuple):
    job_id: str
    attempts: list[tuple[str, tuple[str, ...]]]  # (attempt id, nodes its replicas ran on): folders to remove


class JobDeletion:
    def __init__(self, store: Store, artifacts_url: str = "") -> None:
        self.store = store
        # a live service's inputs name jobs' outputs by their artifact-store URLs (resolved when applied)
        self.outputs_prefix = artifacts_url.rstrip("/") + "/jobs/" if artifacts_url else None

    def blockers(self, job_ids: list[str], sweep: str | None = None, run: str | None = None) -> dict[str, str]:
        """Why each of ``job_ids`` may not be deleted (those that may are left out; so are unknown ids); with
        ``sweep``, its trials may go (with it); with ``run``, that pipeline run's steps' jobs."""
        out: dict[str, str] = {}
        with self.store.read() as s:
            conn = s.connection()
            for i in range(0, len(job_ids), IN_BATCH):
                some = job_ids[i:i + IN_BATCH]
                for jid, status in conn.execute(select(_J.c.id, _J.c.status).where(_J.c.id.in_(some),
                                                                                     _J.c.status.notin_(ENDED))):
                    out[jid] = f"it is {status}: cancel it first, or wait for it to end"
                for jid, of, step in conn.execute(select(_STEPS.c.job_id, _STEPS.c.run_id, _STEPS.c.name)
                                                  .where(_STEPS.c.job_id.in_(some), _STEPS.c.run_id != (run or ""))):
                    out.setdefault(jid, f"it is step {step} of pipeline run {of}")
                for jid, of, n in conn.execute(select(_TRIALS.c.job_id, _TRIALS.c.sweep_id, _TRIALS.c.number)
                                               .where(_TRIALS.c.job_id.in_(some), _TRIALS.c.sweep_id != (sweep or ""))):
                    out.setdefault(jid, f"it is trial {n} of sweep {of}")
                for jid, service in conn.execute(select(_SREPS.c.job_id, _SREPS.c.service_id)
                                                 .where(_SREPS.c.job_id.in_(some))):
                    out.setdefault(jid, f"it is a replica of service {service}")
                for jid in unannounced(conn, "job", some):
                    out.setdefault(jid, NOT_ANNOUNCED)
            wanted = set(job_ids)
            # a step's earlier jobs (before a retry) are listed in its row: few runs have any
            steps = conn.execute(select(_STEPS.c.run_id, _STEPS.c.name, _STEPS.c.jobs)
                                 .where(cast(_STEPS.c.jobs, String) != "[]", _STEPS.c.run_id != (run or ""))).all()
            for of, step, earlier in steps:
                for jid in wanted.intersection(earlier or ()):
                    out.setdefault(jid, f"it is an earlier try of step {step} of pipeline run {of}")
            self._live_users(conn, wanted, out)
        return out

    def _live_users(self, conn, wanted: set[str], out: dict[str, str]) -> None:  # noqa: ANN001
        """Live Dask clusters made of the jobs, jobs waiting for them, live services serving their outputs."""
        c = t.DaskCluster.__table__.c
        for cid, scheduler, workers, owner in conn.execute(select(c.id, c.scheduler_job, c.worker_jobs, c.owner_job)
                                                           .where(c.status.in_(LIVE_CLUSTER))):
            for jid in wanted.intersection({scheduler, owner, *(workers or ())}):
                out.setdefault(jid, f"Dask cluster {cid} is made of it and still running")
        blocked = conn.execute(select(_J.c.id, _J.c.spec).where(_J.c.blocked, _J.c.status == "pending")).all()
        for waiter, spec in blocked:
            for dep in spec.get("after") or ():
                if dep.get("job") in wanted:
                    out.setdefault(dep["job"], f"job {waiter} waits for it (after): cancel that one first")
        sc = t.Service.__table__.c
        for sid, name, spec in conn.execute(select(sc.id, sc.name, sc.spec).where(sc.status.in_(LIVE_SERVICE))):
            for ref in (spec.get("inputs") or {}).values():
                if (jid := self._job_of(ref)) in wanted:
                    out.setdefault(jid, f"service {name} ({sid}) serves its outputs")

    def _job_of(self, ref: object) -> str | None:
        """The job whose outputs a service input names: ``job://ID/…`` as written, or the artifact-store URL
        it was resolved to."""
        if not isinstance(ref, str):
            return None
        for prefix in ("job://", self.outputs_prefix):
            if prefix and ref.startswith(prefix):
                return ref[len(prefix):].split("/", 1)[0]
        return None

    def delete(self, job_ids: list[str], keep: Selector = ()) -> list[Deleted]:
        """Delete the ended ones of ``job_ids`` but those whose labels match ``keep`` (checked in the same
        transaction: a label put on meanwhile counts), archiving what their attempts used (check
        :meth:`blockers` first); what was deleted, with where its attempts ran."""
        out: list[Deleted] = []
        for i in range(0, len(job_ids), IN_BATCH):
            with self.store.write() as s:
                out += delete_in(s.connection(), job_ids[i:i + IN_BATCH], keep)
        self.store.forget_jobs([d.job_id for d in out])
        return out

    def matching(self, job_ids: list[str], selector: Selector) -> list[str]:
        """Those of ``job_ids`` whose labels match ``selector`` (one query per 500 ids)."""
        found: list[str] = []
        with self.store.read() as s:
            for i in range(0, len(job_ids), IN_BATCH):
                found += s.connection().execute(select(_J.c.id).where(_J.c.id.in_(job_ids[i:i + IN_BATCH]),
                                                                      *(label_where(r) for r in selector))).scalars()
        return found

    def trial_jobs(self, sweep_id: str) -> list[str]:
        with self.store.read() as s:
            return list(s.connection().execute(select(_TRIALS.c.job_id).where(_TRIALS.c.sweep_id == sweep_id)
                                               .order_by(_TRIALS.c.number)).scalars())

    def delete_sweep(self, sweep_id: str) -> list[Deleted] | None:
        """An ended sweep with its trials' jobs (check :meth:`blockers` with ``sweep`` first), in one transaction;
        the jobs deleted, or None if the sweep is running or gone."""
        sw = _SWEEPS.c
        with self.store.write() as s:
            conn = s.connection()
            if conn.execute(delete(_SWEEPS).where(sw.id == sweep_id, sw.status != "running")).rowcount != 1:
                return None
            jobs = list(conn.execute(select(_TRIALS.c.job_id).where(_TRIALS.c.sweep_id == sweep_id)).scalars())
            conn.execute(delete(_TRIALS).where(_TRIALS.c.sweep_id == sweep_id))
            out = delete_all(conn, jobs)
        self.store.forget_jobs([d.job_id for d in out])
        return out

    def expired_sweeps(self, before: float, limit: int, skip: set[str]) -> list[str]:
        """Ended sweeps that ended at or before ``before``, none in ``skip``."""
        sw = _SWEEPS.c
        where = [sw.status != "running", sw.ended_at <= before] + ([sw.id.notin_(sorted(skip))] if skip else [])
        with self.store.read() as s:
            return list(s.connection().execute(select(sw.id).where(*where).limit(limit)).scalars())

    def expired(self, before: float, limit: int, skip: set[str], keep: Selector = ()) -> list[str]:
        """Ended jobs that last changed at or before ``before``, none of a pipeline run, sweep or service,
        none whose labels match ``keep`` and none in ``skip``: the ``jobs`` retention's next batch."""
        j = _J.c
        where = [j.status.in_(ENDED), j.updated_at <= before,
                 not_(select(_STEPS.c.job_id).where(_STEPS.c.job_id == j.id).exists()),
                 not_(select(_TRIALS.c.job_id).where(_TRIALS.c.job_id == j.id).exists()),
                 not_(select(_SREPS.c.job_id).where(_SREPS.c.job_id == j.id).exists())]
        where += not_kept(keep)
        if skip:
            where.append(j.id.notin_(sorted(skip)))
        with self.store.read() as s:
            return list(s.connection().execute(select(j.id).where(*where).limit(limit)).scalars())


def not_kept(keep: Selector) -> list:
    """The condition (none, or one) that leaves out the jobs whose labels match ``keep``."""
    return [not_(and_(*(label_where(r) for r in keep)))] if keep else []


def delete_all(conn, ids: list[str]) -> list[Deleted]:  # noqa: ANN001
    """:func:`delete_in` over any number of ids, ``IN_BATCH`` at a time, in the caller's transaction."""
    out: list[Deleted] = []
    for i in range(0, len(ids), IN_BATCH):
        out += delete_in(conn, ids[i:i + IN_BATCH])
    return out


def delete_in(conn, ids: list[str], keep: Selector = ()) -> list[Deleted]:  # noqa: ANN001
    j, a = _J.c, _A.c
    # the jobs' rows locked first, as a change of labels locks them before their label rows (PostgreSQL)
    ids = list(conn.execute(select(j.id).where(j.id.in_(ids), j.status.in_(ENDED), *not_kept(keep))
                            .with_for_update()).scalars())
    if not ids:
        return []
    attempts = conn.execute(select(a.id, a.job_id, a.node, a.created_at, a.ended_at, a.status, a.reason,
                                   a.preempted_by, a.wait).where(a.job_id.in_(ids))).all()
    aids = [r.id for r in attempts]
    nodes: dict[str, set[str]] = {}
    for aid, node in conn.execute(select(_R.c.attempt_id, _R.c.node).where(_R.c.attempt_id.in_(aids))):
        nodes.setdefault(aid, set()).add(node)
    jobs = {r.id: r for r in conn.execute(select(j.id, j.queue, j.team, j.owner, j.spec, _Q.c.team.label("qteam"))
                                          .outerjoin(_Q, _Q.c.name == j.queue).where(j.id.in_(ids)))}
    if attempts:
        archived = [_archived(jobs[r.job_id], r) for r in attempts]
        conn.execute(insert(_UA), archived)
        archive_counts.add(conn, archived)
    for table in _BY_ATTEMPT:
        conn.execute(delete(table).where(table.c.attempt_id.in_(aids)))
    for table in _BY_JOB:
        conn.execute(delete(table).where(table.c.job_id.in_(ids)))
    ev = t.Event.__table__.c
    conn.execute(delete(t.Event.__table__).where(ev.kind == "job", ev.object_id.in_(ids)))
    conn.execute(delete(_A).where(a.job_id.in_(ids)))
    conn.execute(delete(_J).where(j.id.in_(ids)))
    by_job: dict[str, list[tuple[str, tuple[str, ...]]]] = {i: [] for i in ids}
    for r in attempts:
        by_job[r.job_id].append((r.id, tuple(sorted(nodes.get(r.id) or ({r.node} if r.node else set())))))
    return [Deleted(i, by_job[i]) for i in ids]


def _archived(job, attempt) -> dict:  # noqa: ANN001
    spec = job.spec or {}
    return dict(attempt_id=attempt.id, job_id=job.id, queue=job.queue, queue_team=job.qteam, team=job.team,
                owner=job.owner, resources=dict(spec.get("resources") or {}), replicas=int(spec.get("replicas") or 1),
                node=attempt.node, status=attempt.status, reason=attempt.reason, created_at=attempt.created_at,
                ended_at=attempt.ended_at if attempt.ended_at is not None else attempt.created_at,
                preempted_by=attempt.preempted_by, wait=attempt.wait)
