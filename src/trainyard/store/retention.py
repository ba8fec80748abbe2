"""What the retention sweeps read: attempts by when they ended, jobs whose last attempt ended, and how far
each sweep has come (a cursor on ``attempts.ended_at``: an attempt's end is written once)."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import and_, exists, insert, or_, select, update
from sqlalchemy.orm import aliased

from trainyard.store import Store
from trainyard.store import node_tables as nt
from trainyard.store import tables as t
from trainyard.store.store import ENDED

_A, _R, _J, _C = t.Attempt.__table__, t.Replica.__table__, t.Job.__table__, nt.SweepCursor.__table__


class Ended(NamedTuple):
    attempt_id: str
    job_id: str
    ended_at: float
    nodes: tuple[str, ...]  # where its replicas ran (their folders are there)


class RetentionStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def cursor(self, name: str) -> float:
        with self.store.read() as s:
            return s.connection().execute(select(_C.c.at).where(_C.c.name == name)).scalar() or 0.0

    def advance(self, name: str, at: float) -> None:
        with self.store.write() as s:
            conn = s.connection()
            if conn.execute(update(_C).where(_C.c.name == name).values(at=at)).rowcount == 0:
                conn.execute(insert(_C), [{"name": name, "at": at}])

    def ended(self, after: tuple[float, str], until: float, limit: int, last_of_ended_job: bool = False) -> list[Ended]:
        """Attempts that ended after ``after`` (an end time and an attempt id: the last one read) and at or
        before ``until``, by end then id; with ``last_of_ended_job``, only the last attempt of a job that
        has ended (its checkpoints are no attempt's to come)."""
        a = _A.c
        at, aid = after
        where = [or_(a.ended_at > at, and_(a.ended_at == at, a.id > aid)), a.ended_at <= until]
        if last_of_ended_job:
            later = aliased(_A)
            where += [_J.c.status.in_(ENDED),
                      ~exists().where(and_(later.c.job_id == a.job_id, later.c.number > a.number))]
        query = select(a.id, a.job_id, a.ended_at, a.node).where(*where).order_by(a.ended_at, a.id).limit(limit)
        if last_of_ended_job:
            query = query.join(_J, _J.c.id == a.job_id)
        with self.store.read() as s:
            conn = s.connection()
            rows = conn.execute(query).all()
            nodes: dict[str, set[str]] = {}
            ids = [r.id for r in rows]
            for i in range(0, len(ids), 500):
                for aid, node in conn.execute(select(_R.c.attempt_id, _R.c.node).where(_R.c.attempt_id.in_(ids[i:i + 500]))):
                    nodes.setdefault(aid, set()).add(node)
        return [Ended(r.id, r.job_id, r.ended_at, tuple(sorted(nodes.get(r.id) or ({r.node} if r.node else set()))))
                for r in rows]
