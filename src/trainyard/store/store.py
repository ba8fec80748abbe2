"""The store: the only place with SQL.

Every status change is a compare-and-set: read the current status, check the
transition table, then ``UPDATE … WHERE id=? AND status=<what we read>`` and
look at the row count. Two loops can never move one job twice.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from trainyard.errors import AttemptNotFound, InvalidTransition, JobNotFound
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, JobInfo, JobPage
from trainyard.status import AttemptStatus, JobStatus, allowed
from trainyard.store import tables as t
from trainyard.store.db import make_engine, migrate

ACTIVE_ATTEMPT = (AttemptStatus.STARTING.value, AttemptStatus.RUNNING.value)


def new_job_id() -> str:
    return "j-" + secrets.token_hex(5)


class Store:
    def __init__(self, url: str, *, run_migrations: bool = True) -> None:
        if run_migrations:
            migrate(url)
        self.engine = make_engine(url)
        self._reader = sessionmaker(self.engine, expire_on_commit=False)
        self._writer = sessionmaker(self.engine.execution_options(write=True), expire_on_commit=False)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._reader() as s:
            yield s

    @contextmanager
    def write(self) -> Iterator[Session]:
        with self._writer() as s, s.begin():
            yield s

    # -- compare-and-set --------------------------------------------------

    def _cas(self, s: Session, model: type, key: str, new: JobStatus | AttemptStatus, **values: Any) -> bool:
        """Move ``key`` to ``new`` if the table allows it from the status it has now.

        Returns False when the row is already terminal or the move is not
        allowed; raises nothing for a lost race (the caller re-reads).
        """
        enum = type(new)
        row = s.get(model, key, populate_existing=True)
        if row is None:
            raise (JobNotFound if model is t.Job else AttemptNotFound)(f"no such {model.__tablename__[:-1]}: {key}")
        old = enum(row.status)
        if not allowed(old, new):
            return False
        if model is t.Job:
            values.setdefault("updated_at", time.time())
        res = s.execute(
            update(model).where(model.id == key, model.status == old.value).values(status=new.value, **values)
        )
        if res.rowcount != 1:
            return False
        s.expire(row)
        return True

    def move_job(self, job_id: str, new: JobStatus, **values: Any) -> bool:
        with self.write() as s:
            return self._cas(s, t.Job, job_id, new, **values)

    # -- jobs -------------------------------------------------------------

    def create_job(self, spec: JobSpec, snapshot: str | None = None) -> JobInfo:
        now = time.time()
        with self.write() as s:
            seq = (s.scalar(select(func.max(t.Job.seq))) or 0) + 1
            row = t.Job(
                id=new_job_id(), seq=seq, name=spec.name, status=JobStatus.PENDING.value,
                queue=spec.queue, priority=spec.priority, spec=spec.model_dump(mode="json"),
                snapshot=snapshot, created_at=now, updated_at=now, reason="waiting for the scheduler",
            )
            s.add(row)
            s.flush()
            return _job_info(row, [])

    def get_job(self, job_id: str) -> JobInfo:
        with self.read() as s:
            row = s.get(t.Job, job_id)
            if row is None:
                raise JobNotFound(f"no such job: {job_id}", job_id=job_id)
            attempts = s.scalars(select(t.Attempt).where(t.Attempt.job_id == job_id).order_by(t.Attempt.number))
            return _job_info(row, list(attempts))

    def list_jobs(
        self, *, status: list[str] | None = None, name: str | None = None, queue: str | None = None,
        limit: int = 50, cursor: str | None = None,
    ) -> JobPage:
        """Newest first. ``cursor`` is the opaque ``next_cursor`` of the previous page."""
        q = select(t.Job).order_by(t.Job.seq.desc()).limit(limit + 1)
        if status:
            q = q.where(t.Job.status.in_(status))
        if name:
            q = q.where(t.Job.name == name)
        if queue:
            q = q.where(t.Job.queue == queue)
        if cursor:
            q = q.where(t.Job.seq < int(cursor))
        with self.read() as s:
            rows = list(s.scalars(q))
            more = len(rows) > limit
            rows = rows[:limit]
            attempts = self._attempts_of(s, [r.id for r in rows])
            items = [_job_info(r, attempts.get(r.id, [])) for r in rows]
        return JobPage(items=items, next_cursor=str(rows[-1].seq) if more else None)

    def _attempts_of(self, s: Session, job_ids: list[str]) -> dict[str, list[t.Attempt]]:
        out: dict[str, list[t.Attempt]] = {}
        if job_ids:
            q = select(t.Attempt).where(t.Attempt.job_id.in_(job_ids)).order_by(t.Attempt.number)
            for a in s.scalars(q):
                out.setdefault(a.job_id, []).append(a)
        return out

    def pending_jobs(self) -> list[JobInfo]:
        """Pending jobs in submit order, with their past attempts."""
        with self.read() as s:
            rows = list(s.scalars(select(t.Job).where(t.Job.status == JobStatus.PENDING.value).order_by(t.Job.seq)))
            attempts = self._attempts_of(s, [r.id for r in rows])
            return [_job_info(r, attempts.get(r.id, [])) for r in rows]

    def set_reasons(self, reasons: dict[str, str]) -> None:
        """Record why pending jobs wait; only pending rows are touched."""
        if not reasons:
            return
        with self.write() as s:
            current = dict(s.execute(select(t.Job.id, t.Job.reason).where(t.Job.id.in_(list(reasons)))).all())
            for job_id, reason in reasons.items():
                if current.get(job_id, reason) != reason:
                    s.execute(update(t.Job).where(t.Job.id == job_id, t.Job.status == JobStatus.PENDING.value)
                              .values(reason=reason))

    # -- attempts ---------------------------------------------------------

    def admit(self, job_id: str, node: str, gpus: list[str]) -> AttemptInfo | None:
        """pending → starting plus a new attempt, in one transaction; None if the job moved."""
        now = time.time()
        with self.write() as s:
            if not self._cas(s, t.Job, job_id, JobStatus.STARTING, reason=None, not_before=None):
                return None
            number = (s.scalar(select(func.max(t.Attempt.number)).where(t.Attempt.job_id == job_id)) or 0) + 1
            row = t.Attempt(
                id=f"{job_id}-{number}", job_id=job_id, number=number, status=AttemptStatus.STARTING.value,
                node=node, gpus=gpus, handle={}, created_at=now, last_contact_at=now,
                cancel_requested=False, log_size=0, metrics_offset=0,
            )
            s.add(row)
            s.flush()
            return _attempt_info(row)

    def get_attempt(self, attempt_id: str) -> AttemptInfo:
        with self.read() as s:
            row = s.get(t.Attempt, attempt_id)
            if row is None:
                raise AttemptNotFound(f"no such attempt: {attempt_id}", attempt_id=attempt_id)
            return _attempt_info(row)

    def active_attempts(self) -> list[AttemptInfo]:
        with self.read() as s:
            q = select(t.Attempt).where(t.Attempt.status.in_(ACTIVE_ATTEMPT)).order_by(t.Attempt.created_at)
            return [_attempt_info(a) for a in s.scalars(q)]

    def set_handle(self, attempt_id: str, handle: dict[str, Any]) -> None:
        with self.write() as s:
            s.execute(update(t.Attempt).where(t.Attempt.id == attempt_id).values(handle=handle))

    def contact(self, attempt_id: str, *, running: bool) -> AttemptInfo:
        """Record that the launcher reported; on its first report, starting → running."""
        now = time.time()
        with self.write() as s:
            row = s.get(t.Attempt, attempt_id)
            if row is None:
                raise AttemptNotFound(f"no such attempt: {attempt_id}", attempt_id=attempt_id)
            if running and row.status == AttemptStatus.STARTING.value:
                if self._cas(s, t.Attempt, attempt_id, AttemptStatus.RUNNING, started_at=now, last_contact_at=now):
                    self._cas(s, t.Job, row.job_id, JobStatus.RUNNING)
            else:
                s.execute(update(t.Attempt).where(t.Attempt.id == attempt_id).values(last_contact_at=now))
            s.refresh(row)
            return _attempt_info(row)

    def finish_attempt(
        self, attempt_id: str, status: AttemptStatus, *, exit_code: int | None, reason: str,
        message: str | None, job_status: JobStatus, job_reason: str | None = None,
        not_before: float | None = None,
    ) -> bool:
        """End an attempt and move its job on, in one transaction.

        Returns False (and changes nothing) when the attempt had already
        ended: a result reported twice is applied once.
        """
        now = time.time()
        with self.write() as s:
            row = s.get(t.Attempt, attempt_id)
            if row is None:
                raise AttemptNotFound(f"no such attempt: {attempt_id}", attempt_id=attempt_id)
            ok = self._cas(s, t.Attempt, attempt_id, status, exit_code=exit_code, reason=reason,
                           message=message, ended_at=now)
            if not ok:
                return False
            if not self._cas(s, t.Job, row.job_id, job_status, reason=job_reason, not_before=not_before):
                job = s.get(t.Job, row.job_id, populate_existing=True)
                raise InvalidTransition(f"job {row.job_id}: {job.status} → {job_status.value} is not allowed")
            return True

    def request_cancel(self, job_id: str) -> JobStatus:
        """pending → cancelled at once; starting/running → cancelling (the engine stops it)."""
        with self.write() as s:
            row = s.get(t.Job, job_id)
            if row is None:
                raise JobNotFound(f"no such job: {job_id}", job_id=job_id)
            status = JobStatus(row.status)
            if status == JobStatus.PENDING:
                if self._cas(s, t.Job, job_id, JobStatus.CANCELLED, reason="cancelled before it started"):
                    return JobStatus.CANCELLED
            elif status in (JobStatus.STARTING, JobStatus.RUNNING):
                if self._cas(s, t.Job, job_id, JobStatus.CANCELLING, reason="cancel requested"):
                    s.execute(update(t.Attempt).where(t.Attempt.job_id == job_id, t.Attempt.status.in_(ACTIVE_ATTEMPT))
                              .values(cancel_requested=True))
                    return JobStatus.CANCELLING
            s.refresh(row)
            return JobStatus(row.status)


def _attempt_info(a: t.Attempt) -> AttemptInfo:
    return AttemptInfo(
        id=a.id, job_id=a.job_id, number=a.number, status=AttemptStatus(a.status), node=a.node,
        gpus=list(a.gpus or []), exit_code=a.exit_code, reason=a.reason, message=a.message,
        created_at=a.created_at, started_at=a.started_at, ended_at=a.ended_at,
        last_contact_at=a.last_contact_at, cancel_requested=bool(a.cancel_requested), handle=dict(a.handle or {}),
    )


def _job_info(j: t.Job, attempts: list[t.Attempt]) -> JobInfo:
    return JobInfo(
        id=j.id, name=j.name, status=JobStatus(j.status), queue=j.queue, priority=j.priority,
        spec=JobSpec.model_validate(j.spec), snapshot=j.snapshot, created_at=j.created_at,
        updated_at=j.updated_at, not_before=j.not_before, reason=j.reason,
        attempts=[_attempt_info(a) for a in attempts],
    )
