"""Requests for a running job's stacks, and the answers its launchers send with their reports."""

from __future__ import annotations

import time
from typing import Iterable

from sqlalchemy import delete, insert, select, update

from trainyard.spec.reports import StackAnswer, StackAsk
from trainyard.spec.stacks import StackDump, StackStatus
from trainyard.store import Store
from trainyard.store import stack_tables as st

_D = st.StackDump.__table__
EXPIRE = 60.0  # seconds a request waits for its launcher: a report comes every 3 s while the command runs
KEEP = 20      # the newest dumps kept per job (each up to 256 KiB)


def _status(row, now: float) -> StackStatus:  # noqa: ANN001  (a row mapping)
    if row["answered_at"] is None:
        return "expired" if now - row["requested_at"] > EXPIRE else "pending"
    return "failed" if row["error"] and not row["text"] else "done"


def _dump(row, now: float) -> StackDump:  # noqa: ANN001
    return StackDump(id=row["id"], job_id=row["job_id"], attempt_id=row["attempt_id"], replica=row["replica"],
                     node=row["node"], status=_status(row, now), requested_at=row["requested_at"],
                     requested_by=row["requested_by"], locals=row["locals"], native=row["native"],
                     answered_at=row["answered_at"], text=row["text"] or "", error=row["error"])


class StackStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def request(self, job_id: str, attempt_id: str, replicas: Iterable[tuple[int, str | None]],
                by: str | None, with_locals: bool = False, native: bool = False) -> list[StackDump]:
        """A request for each ``(replica, node)``, or the same one still pending (two people asking at once, or
        a hand on the button, make one dump); the job's older dumps past the newest :data:`KEEP` go."""
        now = time.time()
        rows = [dict(job_id=job_id, attempt_id=attempt_id, replica=r, node=node, requested_at=now, requested_by=by,
                     locals=with_locals, native=native) for r, node in replicas]
        out = []
        with self.store.write() as s:
            conn = s.connection()
            waiting = {r["replica"]: r for r in conn.execute(select(_D).where(
                _D.c.attempt_id == attempt_id, _D.c.answered_at.is_(None), _D.c.requested_at > now - EXPIRE,
                _D.c.locals == with_locals, _D.c.native == native)).mappings()}
            for row in rows:
                if (same := waiting.get(row["replica"])) is not None:
                    out.append(_dump(same, now))
                    continue
                i = conn.execute(insert(_D).values(**row)).inserted_primary_key[0]
                out.append(_dump({**row, "id": i, "answered_at": None, "text": None, "error": None}, now))
            kept = select(_D.c.id).where(_D.c.job_id == job_id).order_by(_D.c.id.desc()).limit(KEEP)
            conn.execute(delete(_D).where(_D.c.job_id == job_id, _D.c.id.not_in(kept.scalar_subquery())))
        return out

    def pending(self) -> dict[tuple[str, int], list[StackAsk]]:
        """Unanswered requests that have not expired: (attempt id, replica) → what each asks."""
        out: dict[tuple[str, int], list[StackAsk]] = {}
        with self.store.read() as s:
            for i, attempt, replica, locals_, native in s.connection().execute(
                    select(_D.c.id, _D.c.attempt_id, _D.c.replica, _D.c.locals, _D.c.native)
                    .where(_D.c.answered_at.is_(None), _D.c.requested_at > time.time() - EXPIRE)):
                out.setdefault((attempt, replica), []).append(StackAsk(id=i, locals=locals_, native=native))
        return out

    def answer(self, attempt_id: str, replica: int, answers: list[StackAnswer]) -> int:
        """Record a launcher's answers; only to requests of its own attempt and replica, and once. How many."""
        now, n = time.time(), 0
        with self.store.write() as s:
            conn = s.connection()
            for a in answers:
                n += conn.execute(update(_D).where(_D.c.id == a.id, _D.c.attempt_id == attempt_id,
                                                   _D.c.replica == replica, _D.c.answered_at.is_(None))
                                  .values(answered_at=now, text=a.text, error=a.error)).rowcount
        return n

    def of_job(self, job_id: str) -> list[StackDump]:
        """The job's kept dumps, newest first."""
        with self.store.read() as s:
            rows = s.connection().execute(select(_D).where(_D.c.job_id == job_id).order_by(_D.c.id.desc())
                                          ).mappings().all()
        now = time.time()
        return [_dump(r, now) for r in rows]
