"""The store: the only place with SQL.

Every status change is one compare-and-set, with no read first:
``UPDATE … WHERE id=? AND status IN (the statuses the transition table lets move
to the new one)``, checked on its row count. Two loops can never move one job twice.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import case, func, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from trainyard.errors import AttemptNotFound, InvalidTransition, JobNotFound
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, JobInfo
from trainyard.spec.submitted import STORED
from trainyard.status import AttemptStatus, JobStatus, Reason
from trainyard.store import identity_tables as it
from trainyard.store import tables as t
from trainyard.store.db import data_version, make_engine, migrate, writer_lock, writing
from trainyard.store.cache import Recent
from trainyard.store.cas import ACTOR, IfUnset, cas
from trainyard.store.job_labels import JobLabels
from trainyard.store.job_reads import ENDED, IN_BATCH, JobReads  # noqa: F401 (ENDED: the stores' shared list)
from trainyard.store.line_reads import LineReads
from trainyard.store.moves import Admission, Ending
from trainyard.store.job_list import visible_where  # noqa: F401 (the stores' shared rule)
from trainyard.store.rows import (JOB_FIELDS, Specs, attempt_by_id, attempt_record, attempts_from, replica_record,
                                  spec_now)
from trainyard.store.statements import (ACTIVE, ACTIVE_ATTEMPT, ENDING_JOB, FREE_REQUEUES, INSERT_ATTEMPT, INSERT_JOB,
                                        INSERT_LABELS, INSERT_REPLICA, MAX_SEQ, SCHEDULER_ENDS, SET_HANDLE)
from trainyard.store.telemetry import Outputs
from trainyard.store.tx import WriteTx

ENDED_TTL = 60.0  # seconds an ended job is answered from memory: another server may delete it
Link = Callable[[WriteTx, str], None]  # writes what names a new job (see Store.create_job)


def new_job_id() -> str:
    return "j-" + secrets.token_hex(5)


class Store(LineReads, JobReads, JobLabels):
    def __init__(self, url: str, *, run_migrations: bool = True) -> None:
        if run_migrations:
            migrate(url)
        self.engine = make_engine(url)
        # one kind of session for both: what makes a write is taking its connection in db.writing()
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self._write_lock = writer_lock(self.engine)
        # SQLite: not only this server writes the file (a second Store, an admin command, a script), so
        # not a count of our own commits: the file's own number, which every commit moves
        self._changes = data_version(self.engine)
        self._specs: Specs = Recent(20_000)  # see trainyard.store.cache
        # ended jobs, with their labels revision; another server's change of labels shows within the ttl
        self._ended: Recent[tuple[int, JobInfo]] = Recent(5_000, ttl=ENDED_TTL)
        self._relabels = 0  # changes of labels this store made: a read that began before one keeps nothing

    def close(self) -> None:
        if self._changes is not None:
            self._changes.close()
        self.engine.dispose()

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._session() as s:
            yield s

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One write transaction, under this store's write lock (a :class:`WriteTx`: Core statements on
        its ``connection()``; the ORM's calls reach a Session on the same connection)."""
        seen = self._relabels
        with self._write_lock, self.engine.connect() as conn:
            with writing():
                began = conn.begin()  # on SQLite with the write lock (db.writing)
            s = WriteTx(conn, self._session)
            try:
                with began:
                    yield s  # type: ignore[misc]
                    s.done()
            finally:
                s.close()
        # records of jobs this transaction ended, kept only once it committed (see _finish_replica)
        for job, rev in s.info.get("ended", ()):
            self._keep_ended(job, rev, seen)

    def _keep_ended(self, job: JobInfo, rev: int, seen: int) -> None:
        """Remember an ended job read as of labels revision ``rev``, unless this store changed labels since the
        read began (``seen``, :attr:`_relabels` then): it may hold labels older than the change's."""
        if self._relabels == seen:
            self._ended.put(job.id, (rev, job))

    @property
    def version(self) -> int | None:
        """A number that changes after every write committed to the database, by this store or any other
        connection or process, or None where that is not cheap to know (PostgreSQL): an answer read
        when the number was n still holds while it is n."""
        return None if self._changes is None else self._changes()

    # -- compare-and-set --------------------------------------------------

    _cas = staticmethod(cas)  # the mixins (telemetry, usage) move rows through it too

    def move_job(self, job_id: str, new: JobStatus, **values: Any) -> bool:
        with self.write() as s:
            return self._cas(s, t.Job, job_id, new, **values)

    # -- jobs -------------------------------------------------------------

    def create_job(self, spec: JobSpec, snapshot: str | None = None, *, owner: str | None = None,
                   team: str | None = None, audit: dict[str, Any] | None = None, waits: str | None = None,
                   link: Link | None = None) -> JobInfo:
        """A pending job; with ``audit`` (an audit entry's ``user``, ``source``, ``action`` and ``detail``),
        its audit entry too, naming the new job, in the same transaction: one writer turn per submit. With
        ``waits`` (why), it waits for the jobs of its ``after`` out of the scheduler's line. With ``link``,
        ``link(tx, job_id)`` writes what names the job (a sweep's trial, a pipeline's step) in the same
        transaction: a crash leaves both or neither, never a job nothing tracks; what it raises stores neither."""
        now = time.time()
        with self.write() as s:
            seq = (s.connection().execute(MAX_SEQ).scalar() or 0) + 1
            row = dict(id=new_job_id(), seq=seq, name=spec.name, status=JobStatus.PENDING.value, queue=spec.queue,
                       priority=spec.priority, spec=spec.model_dump(mode="json"), snapshot=snapshot, created_at=now,
                       updated_at=now, not_before=None, reason=waits or "waiting for the scheduler", position=None,
                       owner=owner, team=team, blocked=waits is not None)
            s.connection().execute(INSERT_JOB, [row])  # Core, like Store.admit
            if spec.labels:
                s.connection().execute(INSERT_LABELS, [{"job_id": row["id"], "key": k, "value": v}
                                                       for k, v in spec.labels.items()])
            del row["blocked"]
            if audit is not None:
                s.connection().execute(insert(it.AuditEntry.__table__), [{**audit, "target": row["id"], "at": now}])
            if link is not None:
                link(s, row["id"])
        self._specs.put(row["id"], (0, spec))
        return JobInfo.model_construct(**{**row, "status": JobStatus.PENDING, "spec": spec, "attempts": []})

    # -- attempts ---------------------------------------------------------

    def admit(self, job_id: str, placements: list[tuple[str, list[str]]], *, borrowed: bool = False,
              token_hash: str | None = None, queue: str | None = None,
              submitted_at: float | None = None) -> AttemptInfo | None:
        """pending → starting plus a new attempt with one replica per placement ``(node, gpus)``,
        in one transaction; None if the job moved meanwhile. ``borrowed``: beyond its queue's quota.
        ``token_hash``: of the launchers' credential, stored here so no report can come before it.
        ``queue`` and ``submitted_at``: the job's, when the caller has them (read here otherwise),
        kept on the attempt so ``/metrics`` counts attempts without joining jobs."""
        return self.admit_many([Admission(job_id, placements, borrowed, token_hash, queue, submitted_at)])[0]

    def admit_many(self, admissions: list[Admission]) -> list[AttemptInfo | None]:
        """:meth:`admit` for each of a cycle's admissions, all in one transaction: one writer turn
        (and one commit) for a burst of small jobs instead of one each. Each job's move is still its
        own compare-and-set: a job that moved meanwhile gets None and the others are admitted. The
        attempts' numbers are read in one query and their rows written in one executemany per table:
        a burst admits ~100 jobs a cycle, and three statements each cost more than their rows."""
        now = time.time()
        with self.write() as s:
            conn = s.connection()
            moved = [(i, a) for i, a in enumerate(admissions)
                     if self._cas(s, t.Job, a.job_id, JobStatus.STARTING, reason=None, not_before=None, position=None)]
            if not moved:
                return [None] * len(admissions)
            a_, ids, last = t.Attempt.__table__.c, [a.job_id for _, a in moved], {}
            for k in range(0, len(ids), IN_BATCH):
                last.update(conn.execute(select(a_.job_id, func.max(a_.number))
                                         .where(a_.job_id.in_(ids[k:k + IN_BATCH])).group_by(a_.job_id)).all())
            rows = [self._attempt_rows(conn, a, (last.get(a.job_id) or 0) + 1, now) for _, a in moved]
            # Core INSERTs: on the path from submit to a running job, the ORM's unit of work costs more than they do
            conn.execute(INSERT_ATTEMPT, [attempt for attempt, _ in rows])  # first: replicas reference it
            conn.execute(INSERT_REPLICA, [r for _, replicas in rows for r in replicas])
        out: list[AttemptInfo | None] = [None] * len(admissions)
        for (i, _), (attempt, replicas) in zip(moved, rows):
            out[i] = attempt_record(attempt, [replica_record(r) for r in replicas])
        return out

    @staticmethod
    def _attempt_rows(conn: Any, adm: Admission, number: int, now: float) -> tuple[dict, list[dict]]:
        """The attempt's row and its replicas' rows, for an admitted job."""
        job_id, placements, queue, submitted_at = adm.job_id, adm.placements, adm.queue, adm.submitted_at
        if queue is None or submitted_at is None:
            j = t.Job.__table__.c
            queue, submitted_at = conn.execute(select(j.queue, j.created_at).where(j.id == job_id)).one()
        node, gpus = placements[0]
        attempt = dict(id=f"{job_id}-{number}", job_id=job_id, number=number, status=AttemptStatus.STARTING.value,
                       node=node, gpus=list(gpus), handle={}, created_at=now, last_contact_at=now,
                       borrowed=adm.borrowed, exit_code=None, reason=None, message=None, started_at=None,
                       ended_at=None, stop_reason=None, preempted_by=None, token_hash=adm.token_hash, queue=queue,
                       wait=now - submitted_at if number == 1 else None)
        replicas = [dict(attempt_id=attempt["id"], index=i, node=n, gpus=list(g), status=AttemptStatus.STARTING.value,
                         last_contact_at=now, log_size=0, metrics_offset=0, exit_code=None, reason=None,
                         message=None, started_at=None, ended_at=None)
                    for i, (n, g) in enumerate(placements)]
        return attempt, replicas

    def get_attempt(self, attempt_id: str) -> AttemptInfo:
        with self.read() as s:
            return self._attempt(s, attempt_id)

    def _attempt(self, s: Session, attempt_id: str) -> AttemptInfo:
        found = attempt_by_id(s.connection(), attempt_id)
        if found is None:
            raise AttemptNotFound(f"no such attempt: {attempt_id}", attempt_id=attempt_id)
        return found

    def active_attempts(self) -> list[AttemptInfo]:
        """Starting and running attempts, oldest first (read every cycle)."""
        with self.read() as s:
            return attempts_from(s.connection().execute(ACTIVE).mappings())

    def set_token_hash(self, attempt_id: str, token_hash: str) -> None:
        """A new launcher credential for an attempt launched again: the old token stops working."""
        with self.write() as s:
            s.execute(update(t.Attempt).where(t.Attempt.id == attempt_id).values(token_hash=token_hash))

    def set_handle(self, attempt_id: str, handle: dict[str, Any]) -> None:
        self.set_handles({attempt_id: handle})

    def set_handles(self, handles: dict[str, dict[str, Any]]) -> None:
        """Each attempt's engine handle, all in one transaction (one executemany of a prebuilt UPDATE)."""
        if handles:
            with self.write() as s:
                s.connection().execute(SET_HANDLE, [{"b_id": k, "b_handle": v} for k, v in handles.items()])

    def finish_replica(
        self, attempt_id: str, replica: int, status: AttemptStatus, *, exit_code: int | None, reason: str,
        message: str | None, conclude: Callable[[AttemptInfo, JobStatus, JobSpec, int], Ending] | None = None,
        outputs: Outputs | None = None,
    ) -> tuple[AttemptInfo, bool] | None:
        """End one replica, recording its ``outputs``; None (and no change) when it had already ended.

        When it was the last one running and ``conclude`` is given, the attempt
        and its job are ended in the same transaction, as ``conclude`` says from
        the gang's replicas, the job's status and spec, and which try of the job
        this attempt is (its number less the earlier attempts preempted or
        drained). Returns the attempt and whether it ended.
        """
        with self.write() as s:
            return self._finish_replica(s, attempt_id, replica, status, exit_code=exit_code, reason=reason,
                                        message=message, conclude=conclude, outputs=outputs)

    def _finish_replica(
        self, s: Session, attempt_id: str, replica: int, status: AttemptStatus, *, exit_code: int | None,
        reason: str, message: str | None, conclude: Callable[[AttemptInfo, JobStatus, JobSpec, int], Ending] | None,
        started_at: float | None = None, outputs: Outputs | None = None,
    ) -> tuple[AttemptInfo, bool] | None:
        """``started_at``: the replica's first report is also its last (a command that ended at once)."""
        first = {"started_at": started_at, "last_contact_at": started_at} if started_at else {}
        if not self._cas(s, t.Replica, (attempt_id, replica), status, exit_code=exit_code, reason=reason,
                         message=message, ended_at=time.time(), **first):
            return None
        attempt = self._attempt(s, attempt_id)
        if outputs and outputs.items:  # only with the end it came with: a resent or stale result adds nothing
            self._add_artifacts(s, attempt.job_id, attempt.number, outputs)  # type: ignore[attr-defined]
        if conclude is None or not all(r.status.is_terminal() for r in attempt.replicas):
            if started_at and attempt.status == AttemptStatus.STARTING:  # a gang runs once one replica has run
                if self._cas(s, t.Attempt, attempt_id, AttemptStatus.RUNNING, **first):
                    self._cas(s, t.Job, attempt.job_id, JobStatus.RUNNING, reason=None)  # no starting reason
            return attempt, False
        known = self._specs.get(attempt.job_id)  # validating it again cost more than the rest of the end
        row = s.connection().execute(ENDING_JOB[known is None], {"job_id": attempt.job_id}).one()
        rev = row[1 + len(JOB_FIELDS)]
        if known is not None and known[0] == rev:
            spec = known[1]
        else:  # not in memory, or its labels changed since
            spec, rev = (JobSpec.model_validate(row[-1], context=STORED), rev) if known is None else \
                spec_now(s.connection(), attempt.job_id)
            self._specs.put(attempt.job_id, (rev, spec))
        tries = attempt.number - (s.connection().execute(FREE_REQUEUES, {
            "job_id": attempt.job_id, "number": attempt.number}).scalar_one() if attempt.number > 1 else 0)
        ending = conclude(attempt, JobStatus(row[0]), spec, tries)
        now = time.time()
        if not self._end_attempt(s, attempt_id, attempt.job_id, ending, started_at, now):
            return attempt, False
        ended = attempt.model_copy(update={"status": ending.status, "exit_code": ending.exit_code,
                                           "reason": ending.reason, "message": ending.message, "ended_at": now,
                                           "started_at": attempt.started_at or started_at})
        if ending.job_status.is_terminal() and attempt.number == 1:
            # the ended job as a read would return it, built from the rows in hand: the long polls
            # of a burst's jobs are answered without reading each job back (its only attempt is this one)
            fields = dict(zip(JOB_FIELDS, row[1:1 + len(JOB_FIELDS)]))
            fields.update(reason=ended_reason(ending, fields["reason"]), not_before=ending.not_before, updated_at=now)
            s.info.setdefault("ended", []).append((JobInfo.model_construct(
                **fields, status=ending.job_status, spec=spec, attempts=[ended]), rev))
        return ended, True

    def request_stop(self, attempt_id: str, why: str) -> bool:
        """Mark an attempt as one that must stop; the first reason given is kept."""
        with self.write() as s:
            res = s.execute(update(t.Attempt).where(t.Attempt.id == attempt_id, t.Attempt.stop_reason.is_(None),
                                                    t.Attempt.status.in_(ACTIVE_ATTEMPT)).values(stop_reason=why))
            return res.rowcount == 1

    def preempt(self, attempt_id: str, by_job: str) -> bool:
        """Mark a live attempt to stop as ``Preempted`` for ``by_job``; False if it is already stopping or gone."""
        with self.write() as s:
            res = s.execute(update(t.Attempt).where(t.Attempt.id == attempt_id, t.Attempt.stop_reason.is_(None),
                                                    t.Attempt.status.in_(ACTIVE_ATTEMPT))
                            .values(stop_reason=Reason.PREEMPTED.value, preempted_by=by_job))
            return res.rowcount == 1

    def finish_attempt(self, attempt_id: str, ending: Ending) -> bool:
        """End an attempt and move its job on, in one transaction.

        Returns False (and changes nothing) when the attempt had already
        ended: a result reported twice is applied once.
        """
        with self.write() as s:
            row = s.get(t.Attempt, attempt_id)
            if row is None:
                raise AttemptNotFound(f"no such attempt: {attempt_id}", attempt_id=attempt_id)
            return self._end_attempt(s, attempt_id, row.job_id, ending)

    def _end_attempt(self, s: Session, attempt_id: str, job_id: str, e: Ending, started_at: float | None = None,
                     now: float | None = None) -> bool:
        """``now``: the time written as the attempt's end and the job's update (the caller's record of them)."""
        now = now or time.time()
        first = {"started_at": IfUnset(started_at)} if started_at else {}
        if not self._cas(s, t.Attempt, attempt_id, e.status, exit_code=e.exit_code, reason=e.reason,
                         message=e.message, ended_at=now, **first):
            return False
        by: Any = "scheduler" if e.reason in SCHEDULER_ENDS else ACTOR[e.job_status]
        reason: Any = e.job_reason
        if e.job_status == JobStatus.CANCELLED:  # ended by whoever asked for the cancel: keep who that was, and why
            by, asked = t.Job.__table__.c.status_by, t.Job.__table__.c.reason
            reason = case((asked.is_(None) | (asked == CANCEL_ASKED), e.job_reason), else_=asked)
        if not self._cas(s, t.Job, job_id, e.job_status, reason=reason, not_before=e.not_before, status_by=by,
                         updated_at=now):
            job = s.get(t.Job, job_id, populate_existing=True)
            raise InvalidTransition(f"job {job_id}: {job.status} → {e.job_status.value} is not allowed")
        return True

    def request_cancel(self, job_id: str, *, by: str = "user", why: str | None = None,
                       tx: WriteTx | None = None) -> JobStatus:
        """pending → cancelled at once; starting/running → cancelling (the engine stops it).
        ``by`` and ``why``: who asked and why, for the job's events (default: a user's request). In ``tx`` if
        given (a schedule's replace: with the claim of the fire that replaces it), else in a write of its own."""
        if tx is not None:
            return self._request_cancel(tx, job_id, by, why)
        with self.write() as s:
            return self._request_cancel(s, job_id, by, why)

    def _request_cancel(self, s: WriteTx, job_id: str, by: str, why: str | None) -> JobStatus:
        row = s.get(t.Job, job_id)
        if row is None:
            raise JobNotFound(f"no such job: {job_id}", job_id=job_id)
        status = JobStatus(row.status)
        if status == JobStatus.PENDING:
            if self._cas(s, t.Job, job_id, JobStatus.CANCELLED, reason=why or "cancelled before it started",
                         status_by=by):
                return JobStatus.CANCELLED
        elif status in (JobStatus.STARTING, JobStatus.RUNNING):
            if self._cas(s, t.Job, job_id, JobStatus.CANCELLING, reason=why or CANCEL_ASKED, status_by=by):
                s.execute(update(t.Attempt).where(t.Attempt.job_id == job_id, t.Attempt.status.in_(ACTIVE_ATTEMPT),
                                                  t.Attempt.stop_reason.is_(None))
                          .values(stop_reason=Reason.CANCELLED.value))
                return JobStatus.CANCELLING
        s.refresh(row)
        return JobStatus(row.status)


CANCEL_ASKED = "cancel requested"  # a cancelling job's reason when whoever asked said no more


def ended_reason(ending: Ending, asked: str | None) -> str | None:
    """A job's reason once ``ending`` is applied: a cancel's own why (a sweep's pruning, a service's scale-down)
    stays, where ``asked`` (its reason while cancelling) says more than that a cancel was asked."""
    if ending.job_status == JobStatus.CANCELLED and asked and asked != CANCEL_ASKED:
        return asked
    return ending.job_reason
