"""Deleting ended pipeline runs' records: a run goes whole, with its steps, its artifacts' records and its
steps' jobs (each as :mod:`trainyard.store.deletion` deletes a job: what they used stays in the usage report).

A run's artifacts are its steps' jobs' outputs. While a cached step of another run reuses them (its
``cached_from`` is one of this run's jobs) they are that run's outputs too, so the run stays until that one is
deleted first (as ``docker rmi`` refuses an image a container uses). A run's own cached steps point at other
runs' jobs, which stay. A step is taken from the cache of its own team's runs only, so the runs that hold one
back are its team's; one cached across teams before that rule still holds it back, named only to who may see it.
"""

from __future__ import annotations

from sqlalchemy import delete, select, true, update

from trainyard.auth.permissions import Visible

from trainyard.spec.pipeline_records import RunStatus, StepStatus
from trainyard.store import tables as t
from trainyard.store.deletion import NOT_ANNOUNCED, Deleted, JobDeletion, delete_all
from trainyard.store.store import IN_BATCH, visible_where
from trainyard.store.webhooks import unannounced

_RUNS, _STEPS, _ARTIFACTS = t.PipelineRun.__table__, t.PipelineStep.__table__, t.PipelineArtifact.__table__
ENDED = tuple(s.value for s in RunStatus if s.is_terminal())


class RunDeletion:
    def __init__(self, jobs: JobDeletion) -> None:
        self.jobs = jobs
        self.store = jobs.store

    def run_jobs(self, run_id: str) -> list[str]:
        """Every job the run's steps ran, earlier tries included, in step order."""
        st = _STEPS.c
        with self.store.read() as s:
            rows = s.connection().execute(select(st.job_id, st.jobs, st.status).where(st.run_id == run_id)
                                          .order_by(st.position, st.name)).all()
        out: list[str] = []
        for job_id, earlier, status in rows:
            out += list(earlier or [])
            if job_id and status != StepStatus.CACHED.value:
                out.append(job_id)
        return list(dict.fromkeys(out))

    def blocker(self, run_id: str, status: str, seen: Visible | None = None) -> str | None:
        """Why the run may not be deleted (``status`` as read), or None; naming only runs ``seen`` shows."""
        if status not in ENDED:
            return f"it is {status}: cancel it first, or wait for it to end"
        jobs = self.run_jobs(run_id)
        with self.store.read() as s:
            if (why := _reused(s.connection(), run_id, jobs, seen)) is not None:
                return why
            if unannounced(s.connection(), "pipeline_run", [run_id]):
                return NOT_ANNOUNCED
        kept = self.jobs.blockers(jobs, run=run_id)
        first = next((j for j in jobs if j in kept), None)
        return None if first is None else f"the job of one of its steps, {first}: {kept[first]}"

    def delete(self, run_id: str) -> list[Deleted] | None:
        """An ended run with its steps, artifact records and steps' jobs in one transaction (check
        :meth:`blocker` first); the jobs deleted, or None if the run has not ended, is gone, or a run that
        started meanwhile reuses its outputs."""
        jobs = self.run_jobs(run_id)
        ev, r = t.Event.__table__.c, _RUNS.c
        with self.store.write() as s:
            conn = s.connection()
            # first an update of the run's row that changes nothing: on PostgreSQL it locks the row, so a retry
            # moving the run back to running waits for this transaction (and then finds no run) instead of
            # slipping between the steps' delete and the run's
            held = conn.execute(update(_RUNS).where(r.id == run_id, r.status.in_(ENDED))
                                .values(updated_at=r.updated_at)).rowcount == 1
            if not held or _reused(conn, run_id, jobs) is not None:
                return None
            conn.execute(delete(_STEPS).where(_STEPS.c.run_id == run_id))  # first: their rows point at the run's
            conn.execute(delete(_RUNS).where(r.id == run_id))
            conn.execute(delete(_ARTIFACTS).where(_ARTIFACTS.c.run_id == run_id))
            conn.execute(delete(t.Event.__table__).where(ev.kind == "pipeline_run", ev.object_id == run_id))
            out = delete_all(conn, jobs)
        self.store.forget_jobs([d.job_id for d in out])
        return out

    def expired(self, before: float, limit: int, skip: set[str]) -> list[tuple[str, str]]:
        """(id, status) of ended runs that ended at or before ``before``, none in ``skip``, oldest first."""
        r = _RUNS.c
        where = [r.status.in_(ENDED), r.ended_at <= before] + ([r.id.notin_(sorted(skip))] if skip else [])
        with self.store.read() as s:
            return [tuple(row) for row in s.connection().execute(
                select(r.id, r.status).where(*where).order_by(r.ended_at).limit(limit))]


def _reused(conn, run_id: str, jobs: list[str], seen: Visible | None = None) -> str | None:  # noqa: ANN001
    """Why the run's outputs must stay: other runs' cached steps reuse them. A run ``seen`` does not show is
    counted, not named: its id is not the caller's to learn."""
    st, r = _STEPS.c, _RUNS.c
    shown = visible_where(r, seen) if seen is not None and seen.teams is not None else true()
    runs: dict[str, bool] = {}
    for i in range(0, len(jobs), IN_BATCH):
        runs.update(conn.execute(select(st.run_id, shown).distinct().join(_RUNS, r.id == st.run_id).where(
            st.cached_from.in_(jobs[i:i + IN_BATCH]), st.run_id != run_id,
            st.status == StepStatus.CACHED.value)).all())
    if not runs:
        return None
    named = sorted(run for run, ok in runs.items() if ok)
    hidden = len(runs) - len(named)
    if len(runs) == 1:
        return (f"pipeline run {named[0]} reuses its outputs (a cached step): delete that run first" if named else
                "a pipeline run you cannot see reuses its outputs (a cached step): an admin may delete it first")
    who = ", ".join(named + ([f"{hidden} you cannot see"] if hidden else []))
    return f"pipeline runs {who} reuse its outputs (cached steps): delete those runs first" + (
        " (an admin, those you cannot see)" if hidden else "")
