"""Pipeline runs, their steps and step artifacts in the store.

Beside :class:`~trainyard.store.Store`, over its sessions. Every status change
of a run or a step is a compare-and-set (``UPDATE … WHERE status IN (…)``,
checked on its row count) from the sources in
:mod:`trainyard.spec.pipeline_records`, so a step is submitted once however
many notifications race.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from sqlalchemy import Select, func, or_, select, update

from trainyard.auth.permissions import Visible
from trainyard.errors import ArtifactNotFound, PipelineRunNotFound as RunNotFound
from trainyard.spec.pipeline_graph import StepInstance
from trainyard.spec.pipeline_records import (
    RUN_SOURCES, STEP_SOURCES, PipelineArtifact, PipelineRunInfo, PipelineRunPage, RunStatus, StepInfo, StepStatus,
)
from trainyard.store import Store
from trainyard.store import tables as t
from trainyard.store.store import Link, visible_where
from trainyard.store.tx import WriteTx


class StepMoved(Exception):
    """The step a job was being submitted for was moved meanwhile: nothing was stored."""


class PipelineStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    # -- runs ---------------------------------------------------------------

    def create_run(self, *, name: str, spec: dict[str, Any], params: dict[str, Any], workdirs: dict[str, str],
                   source: str | None, warnings: list[str], instances: list[StepInstance],
                   owner: str | None = None, team: str | None = None, link: Link | None = None) -> str:
        """A run and its steps, waiting; ``link(tx, run_id)`` writes what names it (a schedule's fire) in the
        same transaction, as ``Store.create_job``'s does for a job."""
        now = time.time()
        run_id = "p-" + secrets.token_hex(5)
        with self.store.write() as s:
            seq = (s.scalar(select(func.max(t.PipelineRun.seq))) or 0) + 1
            s.add(t.PipelineRun(id=run_id, seq=seq, name=name, status=RunStatus.RUNNING.value, spec=spec,
                                params=params, workdirs=workdirs, source=source, warnings=list(warnings),
                                retries=0, reason=None, created_at=now, updated_at=now, owner=owner,
                                team=team))
            s.flush()
            s.add_all(t.PipelineStep(
                run_id=run_id, name=i.name, step=i.step, position=n, index=i.index,
                item=None if i.index is None else {"value": i.item}, status=StepStatus.WAITING.value, job=i.job,
                needs=i.needs, inputs=i.inputs, outputs=i.outputs, cache=i.cache, workdir=i.workdir, jobs=[],
                artifacts={},
            ) for n, i in enumerate(instances))
            if link is not None:
                link(s, run_id)
        return run_id

    def get_run(self, run_id: str) -> PipelineRunInfo:
        with self.store.read() as s:
            row = s.get(t.PipelineRun, run_id, populate_existing=True)
            if row is None:
                raise RunNotFound(f"no such pipeline run: {run_id}", run_id=run_id)
            return self._run_info(s, row, self._steps(s, [run_id]).get(run_id, []))

    def list_runs(self, *, status: list[str] | None = None, limit: int = 50, cursor: str | None = None,
                  visible: Visible | None = None, name: str | None = None,
                  until: float | None = None, exact_name: str | None = None) -> PipelineRunPage:
        q = select(t.PipelineRun).order_by(t.PipelineRun.seq.desc()).limit(limit + 1)
        if visible is not None and visible.teams is not None:
            q = q.where(visible_where(t.PipelineRun.__table__.c, visible))
        if status:
            q = q.where(t.PipelineRun.status.in_(status))
        if name:  # a part of the name, any case; % and _ are plain characters
            q = q.where(func.lower(t.PipelineRun.name).contains(name.lower(), autoescape=True))
        if exact_name is not None:
            q = q.where(t.PipelineRun.name == exact_name)
        if until is not None:
            q = q.where(t.PipelineRun.created_at < until)
        if cursor:
            q = q.where(t.PipelineRun.seq < int(cursor))
        with self.store.read() as s:
            rows = list(s.scalars(q))
            more = len(rows) > limit
            rows = rows[:limit]
            steps = self._steps(s, [r.id for r in rows])
            items = [self._run_info(s, r, steps.get(r.id, [])) for r in rows]
        return PipelineRunPage(items=items, next_cursor=str(rows[-1].seq) if more else None)

    def active_runs(self) -> list[str]:
        live = [RunStatus.RUNNING.value, RunStatus.CANCELLING.value]
        with self.store.read() as s:
            return list(s.scalars(select(t.PipelineRun.id).where(t.PipelineRun.status.in_(live))))

    def live_jobs(self) -> dict[str, str]:
        """Job id -> run id for every step whose job is live."""
        with self.store.read() as s:
            q = select(t.PipelineStep.job_id, t.PipelineStep.run_id).where(
                t.PipelineStep.status == StepStatus.SUBMITTED.value)
            return {j: r for j, r in s.execute(q).all() if j}

    def move_run(self, run_id: str, new: RunStatus, *, by: str = "pipeline-runner", tx: WriteTx | None = None,
                 **values: Any) -> bool:
        """``by``: who moved it, for the run's events; in ``tx`` if given (a schedule's replace: with the claim
        of the fire that replaces it), else in a write of its own."""
        now = time.time()
        if new.is_terminal():
            values.setdefault("ended_at", now)
        stmt = (update(t.PipelineRun).where(t.PipelineRun.id == run_id,
                                            t.PipelineRun.status.in_([v.value for v in RUN_SOURCES[new]]))
                .values(status=new.value, updated_at=now, status_by=by, **values)
                .execution_options(synchronize_session=False))
        if tx is not None:
            return tx.execute(stmt).rowcount == 1
        with self.store.write() as s:
            return s.execute(stmt).rowcount == 1

    def move_step(self, run_id: str, name: str, new: StepStatus, **values: Any) -> bool:
        with self.store.write() as s:
            return self._move_step(s, run_id, name, new, **values)

    def submit_step(self, tx: WriteTx, run_id: str, name: str, job_id: str, **values: Any) -> None:
        """Step ``name`` submitted as ``job_id``, in ``tx``: the transaction that stores its job
        (``Store.create_job``'s ``link``), so a crash never leaves a step's job that its run does not know (it
        would run beside the one submitted again in its place). :class:`StepMoved`, storing neither, if the
        step moved meanwhile (another server submitted it first, a cancel)."""
        if not self._move_step(tx, run_id, name, StepStatus.SUBMITTED, job_id=job_id, **values):
            raise StepMoved(f"{run_id}/{name}")

    def _move_step(self, s, run_id: str, name: str, new: StepStatus, **values: Any) -> bool:  # noqa: ANN001
        stmt = (update(t.PipelineStep).where(t.PipelineStep.run_id == run_id, t.PipelineStep.name == name,
                                             t.PipelineStep.status.in_([v.value for v in STEP_SOURCES[new]]))
                .values(status=new.value, **values).execution_options(synchronize_session=False))
        if s.execute(stmt).rowcount != 1:
            return False
        s.execute(update(t.PipelineRun).where(t.PipelineRun.id == run_id).values(updated_at=time.time()))
        return True

    def reset_for_retry(self, run_id: str) -> list[str]:
        """failed/cancelled run → running, its failed, cancelled and skipped steps → waiting, in one
        transaction; the names of the steps that will run again (empty: the run was not retryable)."""
        again = [v.value for v in STEP_SOURCES[StepStatus.WAITING]]
        with self.store.write() as s:
            run = s.get(t.PipelineRun, run_id, populate_existing=True)
            if run is None:
                raise RunNotFound(f"no such pipeline run: {run_id}", run_id=run_id)
            stmt = (update(t.PipelineRun).where(t.PipelineRun.id == run_id,
                                                t.PipelineRun.status.in_([v.value for v in RUN_SOURCES[RunStatus.RUNNING]]))
                    .values(status=RunStatus.RUNNING.value, status_by="user", retries=run.retries + 1, reason=None,
                            ended_at=None,
                            updated_at=time.time()).execution_options(synchronize_session=False))
            if s.execute(stmt).rowcount != 1:
                return []
            rows = list(s.scalars(select(t.PipelineStep).where(t.PipelineStep.run_id == run_id,
                                                                 t.PipelineStep.status.in_(again))))
            for r in rows:
                history = [*(r.jobs or []), *([r.job_id] if r.job_id else [])]
                s.execute(update(t.PipelineStep).where(t.PipelineStep.run_id == run_id, t.PipelineStep.name == r.name)
                          .values(status=StepStatus.WAITING.value, job_id=None, jobs=history, reason=None,
                                  started_at=None, ended_at=None, artifacts={}, cache_key=None))
            return [r.name for r in rows]

    def job_statuses(self, job_ids: list[str]) -> dict[str, tuple[str, str | None]]:
        """Job id -> (status, reason)."""
        if not job_ids:
            return {}
        with self.store.read() as s:
            q = select(t.Job.id, t.Job.status, t.Job.reason).where(t.Job.id.in_(job_ids))
            return {j: (st, r) for j, st, r in s.execute(q).all()}

    # -- cache and artifacts --------------------------------------------------

    def find_cached(self, cache_key: str, team: str | None) -> tuple[str, dict[str, str]] | None:
        """(producing job id, output -> artifact id) of the newest step that succeeded with this key in a run of
        ``team`` (None: the runs without a team, an admin's)."""
        done = [StepStatus.SUCCEEDED.value, StepStatus.CACHED.value]
        # only the team's own runs: another team's outputs are not the caller's to read, nor its to overwrite
        same = t.PipelineRun.team.is_(None) if team is None else t.PipelineRun.team == team
        with self.store.read() as s:
            q = (select(t.PipelineStep).join(t.PipelineRun, t.PipelineRun.id == t.PipelineStep.run_id)
                 .where(t.PipelineStep.cache_key == cache_key, t.PipelineStep.status.in_(done), same)
                 .order_by(t.PipelineStep.ended_at.desc()).limit(1))
            row = s.scalars(q).first()
            if row is None:
                return None
            return row.cached_from or row.job_id or "", dict(row.artifacts or {})

    def add_artifact(self, **values: Any) -> PipelineArtifact:
        with self.store.write() as s:
            row = t.PipelineArtifact(id="a-" + secrets.token_hex(6), created_at=time.time(), **values)
            s.add(row)
            s.flush()
            return _artifact(row)

    def artifacts(self, ids: list[str]) -> dict[str, PipelineArtifact]:
        if not ids:
            return {}
        with self.store.read() as s:
            return {r.id: _artifact(r) for r in s.scalars(select(t.PipelineArtifact).where(
                t.PipelineArtifact.id.in_(ids)))}

    def find_artifact(self, key: str, seen: Visible | None = None) -> PipelineArtifact:
        """By id, digest, or a unique prefix of either (``sha256:`` may be left out), among the artifacts of the
        runs ``seen`` shows; ``used_by`` names only those runs too."""
        digest = key if key.startswith("sha256:") else f"sha256:{key}"
        a, st = t.PipelineArtifact, t.PipelineStep
        # what the caller may not see is left out before anything is matched: an answer that differed for
        # another team's artifact would give its ids and digests away, a character at a time
        with self.store.read() as s:
            row = s.scalars(_shown(select(a).where(a.id == key), a.run_id, seen)).first()
            if row is None:
                q = _shown(select(a).where(or_(a.digest.startswith(digest, autoescape=True),
                                               a.id.startswith(key, autoescape=True))), a.run_id, seen)
                rows = list(s.scalars(q.order_by(a.created_at).limit(50)))
                if len({r.digest for r in rows}) > 1:
                    raise ArtifactNotFound(f"{key!r} matches several artifacts; give more of it", key=key)
                row = rows[0] if rows else None
            if row is None:
                raise ArtifactNotFound(f"no artifact with id or digest {key!r}", key=key)
            info = _artifact(row)
            users = s.execute(_shown(select(st.run_id, st.name).where(
                st.cached_from == row.job_id, st.status == StepStatus.CACHED.value), st.run_id, seen)).all()
            info.used_by = [f"{r}/{n}" for r, n in users]
            return info

    # -- rows → records -------------------------------------------------------

    def _steps(self, s, run_ids: list[str]) -> dict[str, list[StepInfo]]:  # noqa: ANN001
        if not run_ids:
            return {}
        rows = list(s.scalars(select(t.PipelineStep).where(t.PipelineStep.run_id.in_(run_ids))
                              .order_by(t.PipelineStep.position).execution_options(populate_existing=True)))
        live = [r.job_id for r in rows if r.job_id and r.status == StepStatus.SUBMITTED.value]
        jobs = dict(s.execute(select(t.Job.id, t.Job.status).where(t.Job.id.in_(live))).all()) if live else {}
        out: dict[str, list[StepInfo]] = {}
        for r in rows:
            status = jobs.get(r.job_id, "pending") if r.status == StepStatus.SUBMITTED.value else r.status
            if r.status == StepStatus.SUBMITTED.value and "serve" in (r.job or {}):
                status = "running"  # a serve step: its service is applied, a replica not ready yet
            out.setdefault(r.run_id, []).append(StepInfo(
                name=r.name, step=r.step, index=r.index, item=(r.item or {}).get("value"), status=status,
                state=StepStatus(r.status),
                job_id=r.job_id, jobs=list(r.jobs or []), needs=list(r.needs or []), inputs=dict(r.inputs or {}),
                outputs=list(r.outputs or []), artifacts=dict(r.artifacts or {}), cache=r.cache,
                cache_key=r.cache_key, cached_from=r.cached_from, reason=r.reason, workdir=r.workdir,
                job=dict(r.job or {}), started_at=r.started_at, ended_at=r.ended_at))
        return out

    def _run_info(self, s, row: t.PipelineRun, steps: list[StepInfo]) -> PipelineRunInfo:  # noqa: ANN001
        return PipelineRunInfo(
            id=row.id, name=row.name, status=RunStatus(row.status), params=dict(row.params or {}),
            spec=dict(row.spec or {}), workdirs=dict(row.workdirs or {}), source=row.source,
            warnings=list(row.warnings or []), retries=row.retries, reason=row.reason, created_at=row.created_at,
            updated_at=row.updated_at, ended_at=row.ended_at, owner=row.owner, team=row.team, steps=steps)


def _shown(q: Select, run_id: Any, seen: Visible | None) -> Select:
    """``q`` less the rows whose run (its id in ``run_id``) ``seen`` does not show."""
    if seen is None or seen.teams is None:
        return q
    return q.join(t.PipelineRun, t.PipelineRun.id == run_id).where(visible_where(t.PipelineRun.__table__.c, seen))


def _artifact(r: t.PipelineArtifact) -> PipelineArtifact:
    return PipelineArtifact(id=r.id, digest=r.digest, run_id=r.run_id, step=r.step, job_id=r.job_id,
                            attempt=r.attempt, output=r.output, url=r.url, size=r.size, files=r.files,
                            inputs=dict(r.inputs or {}), code=r.code, cache_key=r.cache_key, created_at=r.created_at)
