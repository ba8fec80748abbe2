"""Reading jobs, as part of :class:`~trainyard.store.store.Store`: one by id, many by id, a page of a listing,
counts; an ended job is answered from memory (for at most ``ENDED_TTL`` seconds: another server may delete it).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from trainyard.auth.permissions import Visible
from trainyard.errors import JobNotFound
from trainyard.spec.job_query import JobFilter
from trainyard.spec.records import JobInfo, JobPage
from trainyard.status import JobStatus
from trainyard.store import job_list
from trainyard.store import tables as t
from trainyard.store.job_list import job_where
from trainyard.store.rows import job_by_id, job_records
from trainyard.store.statements import JOB_STATE

ENDED = [s.value for s in JobStatus if s.is_terminal()]
IN_BATCH = 500  # ids bound in one IN (...): well under any driver's limit (SQLite's older builds: 999)


class JobReads:
    """Mixed into the Store, whose ``read()`` sessions, ``_specs`` and ``_ended`` memories and ``_keep_ended``
    it uses."""

    def get_job(self, job_id: str) -> JobInfo:
        """A job with its attempts (read on every long poll and every ended attempt)."""
        if (ended := self._ended.get(job_id)) is not None:
            return ended[1]
        seen = self._relabels
        with self.read() as s:
            found = job_by_id(s.connection(), job_id, self._specs)
        if found is None:
            raise JobNotFound(f"no such job: {job_id}", job_id=job_id)
        job, rev = found
        if job.status.is_terminal():
            self._keep_ended(job, rev, seen)
        return job

    def job_state(self, job_id: str) -> tuple[JobStatus, str | None, str | None]:
        """A job's (status, team, owner): what a long poll looks at before it waits, at a quarter
        of the CPU of :meth:`get_job` (one row, no attempts, no records built)."""
        with self.read() as s:
            row = s.connection().execute(JOB_STATE, {"job_id": job_id}).first()
        if row is None:
            raise JobNotFound(f"no such job: {job_id}", job_id=job_id)
        return JobStatus(row[0]), row[1], row[2]

    def ended_job(self, job_id: str) -> JobInfo | None:
        """The job if it has ended and was read lately; from memory only, so it never blocks."""
        kept = self._ended.get(job_id)
        return kept[1] if kept is not None else None

    def forget_jobs(self, job_ids: list[str]) -> None:
        """Deleted jobs: out of this store's memory."""
        for job_id in job_ids:
            self._ended.forget(job_id)
            self._specs.forget(job_id)

    def ended_among(self, job_ids: list[str]) -> list[str]:
        """Which of ``job_ids`` have ended (ids of no job are left out): one query per 500 ids."""
        c, found = t.Job.__table__.c, []
        with self.read() as s:
            for i in range(0, len(job_ids), IN_BATCH):
                some = job_ids[i:i + IN_BATCH]
                found += s.connection().execute(select(c.id).where(c.id.in_(some), c.status.in_(ENDED))).scalars()
        return found

    def _job_records(self, conn: Any, where: Any, attempts: bool = True) -> list[JobInfo]:
        seen = self._relabels
        found = job_records(conn, where, self._specs, attempts)
        if attempts:
            for job, rev in found:
                if job.status.is_terminal():
                    self._keep_ended(job, rev, seen)
        return [job for job, _ in found]

    def get_jobs(self, job_ids: list[str]) -> list[JobInfo]:
        """Jobs by id, without their attempts (for what never changes: queue, priority, the spec but its labels)."""
        with self.read() as s:
            return self._job_records(s.connection(), t.Job.__table__.c.id.in_(list(job_ids)), attempts=False)

    def job_statuses(self, job_ids: list[str]) -> dict[str, JobStatus]:
        """Job id -> status, for those that exist (one query, no records built)."""
        if not job_ids:
            return {}
        c = t.Job.__table__.c
        with self.read() as s:
            rows = s.connection().execute(select(c.id, c.status).where(c.id.in_(list(job_ids)))).all()
        return {j: JobStatus(st) for j, st in rows}

    def list_jobs(self, where: JobFilter | None = None, *, sort: str = "-created", limit: int = 50,
                  cursor: str | None = None, offset: int = 0, count: bool = False, visible: Visible | None = None,
                  **fields: Any) -> JobPage:
        """A page of jobs matching ``where`` (or the JobFilter ``fields``), only what ``visible`` lets the
        caller see, in ``sort`` order (newest first by default). ``cursor`` is the ``next_cursor`` of the
        page before (submit-order sorts only); ``offset`` skips jobs. With ``count``, the number of matching
        jobs up to TOTAL_CAP. Three queries at most, whatever ``limit`` (trainyard.store.job_list)."""
        f = where or JobFilter(**{**fields, "status": tuple(fields.get("status") or ())})
        conds = job_where(f, visible)
        if cursor:
            seq = t.Job.__table__.c.seq
            conds.append(seq < int(cursor) if sort == "-created" else seq > int(cursor))
        seen = self._relabels
        with self.read() as s:
            conn = s.connection()
            found = job_list.page(conn, conds, sort, limit, offset, self._specs, self._ended,
                                  lambda job, rev: self._keep_ended(job, rev, seen))
            total, capped = None, False
            if count:
                # a first page that is not full has counted itself
                total, capped = (len(found.jobs), False) if not (offset or cursor or found.more) \
                    else job_list.count_capped(conn, conds)
        created = sort in ("-created", "created")
        return JobPage(items=found.jobs, next_cursor=str(found.last_seq) if found.more and created else None,
                       more=found.more, total=total, total_capped=capped)

    def job_counts(self, where: JobFilter, visible: Visible | None = None) -> dict[str, int]:
        """Matching jobs per status, in one query (cheap enough to poll)."""
        with self.read() as s:
            return job_list.counts(s.connection(), job_where(where, visible))
