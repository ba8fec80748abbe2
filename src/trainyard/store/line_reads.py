"""What the scheduler reads and writes of the waiting line every cycle, as part of :class:`Store`."""

from __future__ import annotations

from sqlalchemy import select

from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo
from trainyard.spec.submitted import STORED
from trainyard.store import tables as t
from trainyard.store.moves import Waiting
from trainyard.store.rows import attempts_from
from trainyard.store.statements import (ACTIVE, SET_REASON, SET_STARTING_REASON, WAITING, WAITING_LAST,
                                       WAITING_REASONS)


class LineReads:
    """Mixed into :class:`~trainyard.store.store.Store`, whose ``read()`` and ``write()`` sessions it uses."""

    def waiting(self) -> list[Waiting]:
        """Pending jobs in submit order, with what changes while they wait and how their last
        attempt ended; specs come separately (:meth:`specs`), as they never change."""
        return self.line(active=False)[0]

    def line(self, active: bool = True) -> tuple[list[Waiting], list[AttemptInfo]]:
        """:meth:`waiting` and, with ``active`` and when some job waits, the active attempts, read together:
        a cycle that admits a lone job read them in two sessions, and opening one cost as much as its queries."""
        with self.read() as s:
            conn = s.connection()
            rows = conn.execute(WAITING).all()
            if not rows:  # most wake-ups after an attempt ends
                return [], []
            # the newest attempt's row is the last one kept
            last = {job_id: (reason, by) for job_id, reason, by in conn.execute(WAITING_LAST)}
            waiting = [Waiting(i, q, p, c, nb, *last.get(i, (None, None)), o, tm) for i, q, p, c, nb, o, tm in rows]
            return waiting, attempts_from(conn.execute(ACTIVE).mappings()) if active else []

    def specs(self, job_ids: list[str]) -> dict[str, tuple[JobSpec, str | None]]:
        """``(spec, snapshot)`` of each job."""
        c = t.Job.__table__.c
        with self.read() as s:
            rows = s.connection().execute(select(c.id, c.spec, c.snapshot).where(c.id.in_(list(job_ids))))
            return {i: (JobSpec.model_validate(spec, context=STORED), snap) for i, spec, snap in rows}

    def set_reasons(self, reasons: dict[str, str], positions: dict[str, int] | None = None) -> None:
        """Record why pending jobs wait and how many jobs are ahead of each; only pending rows are touched."""
        if not reasons:
            return
        positions = positions or {}
        with self.write() as s:
            conn = s.connection()
            current = {i: (r, p) for i, r, p in conn.execute(WAITING_REASONS)}
            wanted = {job_id: (reason, positions.get(job_id)) for job_id, reason in reasons.items()}
            # a job that has left the line since the plan (not read back) is not written either
            changed = [{"b_id": job_id, "b_reason": new[0], "b_position": new[1]}
                       for job_id, new in wanted.items() if current.get(job_id, new) != new]
            if changed:
                conn.execute(SET_REASON, changed)

    def set_starting_reasons(self, reasons: dict[str, str | None]) -> None:
        """Why each of these jobs, admitted, has not started (None: nothing to say any more); a job that has
        moved on since (running, ended) is left as it is."""
        if reasons:
            with self.write() as s:
                s.connection().execute(SET_STARTING_REASON, [{"b_id": job_id, "b_reason": why}
                                                             for job_id, why in reasons.items()])
