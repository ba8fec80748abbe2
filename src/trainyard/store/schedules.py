"""Schedules: one row each, and one row per fire naming the job it started (or why none).

A fire is claimed by moving ``next_at`` from the value read to the next one (a
compare-and-set): two servers, or a fire and a pause, never both act on one. The
claim, the fire's row and the job (or pipeline run) it starts are one transaction:
a crash leaves the fire made and recorded, or still due, never lost or untracked.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, NamedTuple

from sqlalchemy import and_, delete, func, insert, or_, select, update

from trainyard.auth.permissions import Visible
from trainyard.errors import Conflict, ScheduleNotFound
from trainyard.spec.pipeline_records import RunStatus
from trainyard.spec.schedule import ScheduleRun, ScheduleSpec
from trainyard.spec.submitted import STORED
from trainyard.store import Store
from trainyard.store import schedule_tables as st
from trainyard.store import tables as t
from trainyard.spec.paging import Paging
from trainyard.store.paging import cut, paged
from trainyard.store.store import ENDED, visible_where
from trainyard.store.tx import WriteTx

_S, _R = st.Schedule.__table__, st.ScheduleRun.__table__
_RUN_COLUMNS = [_R.c[k] for k in ScheduleRun.model_fields if k != "gone"]  # gone: read with the job and run
KEEP_RUNS = 200  # fires remembered per schedule (the jobs themselves stay in the job list)
NO_TEAM = "-"
LIVE_RUN = (RunStatus.RUNNING.value, RunStatus.CANCELLING.value)  # a failed run is final until retried: ended here


class Claim(NamedTuple):
    """A fire's claim on its schedule: ``next_at`` from ``due`` (as read) on to ``next_at``."""

    schedule_id: str
    due: float
    next_at: float | None
    last_at: float


class FireTaken(Exception):
    """Another fire, a pause or a delete moved the schedule first: nothing of this fire was stored."""


class ScheduleRow(dict):
    """A row as a dict, its spec parsed (``row["spec"]`` is a :class:`ScheduleSpec`)."""


class ScheduleStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, spec: ScheduleSpec, snapshot: str | None, owner: str | None, team: str | None,
               next_at: float | None, workdirs: dict[str, str] | None = None, source: str | None = None) -> str:
        now = time.time()
        scope = team or NO_TEAM
        with self.store.write() as s:
            taken = s.connection().execute(select(_S.c.id).where(_S.c.scope == scope, _S.c.name == spec.name)).first()
            if taken is not None:
                raise Conflict(f"name: team {team or '(none)'} has a schedule named {spec.name} already ({taken[0]}); "
                               "delete it or choose another name", field="name")
            seq = (s.scalar(select(func.max(_S.c.seq))) or 0) + 1
            row = dict(id="sc-" + secrets.token_hex(5), seq=seq, name=spec.name, scope=scope, team=team, owner=owner,
                       spec=spec.model_dump(mode="json"), snapshot=snapshot, workdirs=workdirs, source=source,
                       suspended=spec.suspend,
                       next_at=None if spec.suspend else next_at, last_at=None, created_at=now, updated_at=now)
            s.connection().execute(insert(_S), [row])
        return row["id"]

    def find(self, key: str, visible: Visible | None = None) -> ScheduleRow:
        """A schedule by id, else by name, among those the caller sees; a name two teams use needs the id."""
        seen = _seen(visible)
        found = self._rows((_S.c.id == key) & seen) or self._rows((_S.c.name == key) & seen)
        if not found:
            raise ScheduleNotFound(f"no such schedule: {key}", schedule=key)
        if len(found) > 1:
            raise Conflict(f"{len(found)} schedules are named {key} (teams "
                           f"{', '.join(r['team'] or '(none)' for r in found)}): name one by its id", schedule=key)
        return found[0]

    def list(self, visible: Visible | None = None) -> list[ScheduleRow]:
        return self._rows(_seen(visible))

    def page(self, visible: Visible | None, paging: Paging) -> tuple[list[ScheduleRow], str | None]:
        """One page of the schedules ``visible`` lets the caller see, newest first, and the next page's cursor."""
        return cut(self._rows(_seen(visible), paging), paging, lambda r: r["seq"])

    def due(self, now: float) -> list[ScheduleRow]:
        return self._rows(_S.c.next_at <= now)

    def next_due(self) -> float | None:
        """The earliest fire of any schedule (the loop sleeps until then)."""
        with self.store.read() as s:
            return s.scalar(select(func.min(_S.c.next_at)))

    def _rows(self, where: Any, paging: Paging | None = None) -> list[ScheduleRow]:
        q = select(_S).where(where).order_by(_S.c.seq)
        with self.store.read() as s:
            rows = s.connection().execute(q if paging is None else paged(q, _S.c.seq, paging)).mappings().all()
        return [ScheduleRow({**r, "spec": ScheduleSpec.model_validate(r["spec"], context=STORED)}) for r in rows]

    def claim(self, tx: WriteTx, claim: Claim) -> None:
        """Move the schedule past the fire due at ``claim.due``, in ``tx``; :class:`FireTaken` if another fire, a
        pause or a delete came first."""
        stmt = (update(_S).where(_S.c.id == claim.schedule_id, _S.c.next_at == claim.due)
                .values(next_at=claim.next_at, last_at=claim.last_at, updated_at=time.time()))
        if tx.connection().execute(stmt).rowcount != 1:
            raise FireTaken(claim.schedule_id)

    def hold(self, schedule_id: str, due: float) -> bool:
        """Pause the schedule the loop found due at ``due`` and must not fire (see ScheduleService.held); False if
        a fire, a pause or a delete moved it first."""
        with self.store.write() as s:
            stmt = (update(_S).where(_S.c.id == schedule_id, _S.c.next_at == due)
                    .values(suspended=True, next_at=None, updated_at=time.time()))
            return s.connection().execute(stmt).rowcount == 1

    def set_suspended(self, schedule_id: str, suspended: bool, next_at: float | None) -> bool:
        """Pause (``next_at`` None) or resume; False if it already was."""
        with self.store.write() as s:
            stmt = (update(_S).where(_S.c.id == schedule_id, _S.c.suspended.is_(not suspended))
                    .values(suspended=suspended, next_at=next_at, updated_at=time.time()))
            return s.connection().execute(stmt).rowcount == 1

    def delete(self, schedule_id: str) -> None:
        with self.store.write() as s:
            s.connection().execute(delete(_R).where(_R.c.schedule_id == schedule_id))
            s.connection().execute(delete(_S).where(_S.c.id == schedule_id))

    # -- fires ----------------------------------------------------------------------

    def add_runs(self, schedule_id: str, runs: list[ScheduleRun], claim: Claim | None = None) -> bool:
        """:meth:`record` in a transaction of its own (fires that started nothing); False if the claim failed."""
        try:
            with self.store.write() as s:
                self.record(s, schedule_id, runs, claim)
        except FireTaken:
            return False
        return True

    def record(self, tx: WriteTx, schedule_id: str, runs: list[ScheduleRun], claim: Claim | None = None) -> None:
        """Record fires (forgetting those past the latest KEEP_RUNS), after the ``claim`` of the fire they make if
        given (:class:`FireTaken` if it fails), in ``tx``: for a fire that starts a job or a pipeline run, the
        transaction that stores it (its ``link``)."""
        if claim is not None:
            self.claim(tx, claim)
        conn = tx.connection()
        conn.execute(insert(_R), [{"schedule_id": schedule_id, **run.model_dump(exclude={"gone"})} for run in runs])
        oldest_kept = conn.execute(select(_R.c.id).where(_R.c.schedule_id == schedule_id)
                                   .order_by(_R.c.id.desc()).offset(KEEP_RUNS - 1).limit(1)).scalar()
        if oldest_kept is not None:
            conn.execute(delete(_R).where(_R.c.schedule_id == schedule_id, _R.c.id < oldest_kept))

    def runs_of(self, schedule_ids: list[str], limit: int = 20) -> dict[str, list[ScheduleRun]]:
        """The latest ``limit`` fires of each schedule, newest first, in one read."""
        out: dict[str, list[ScheduleRun]] = {i: [] for i in schedule_ids}
        if not schedule_ids:
            return out
        ranked = (select(_R.c.schedule_id, *_RUN_COLUMNS,
                         func.row_number().over(partition_by=_R.c.schedule_id, order_by=_R.c.id.desc()).label("n"))
                  .where(_R.c.schedule_id.in_(schedule_ids)).subquery())
        j, p = t.Job.__table__, t.PipelineRun.__table__
        # a fire keeps the id of the job or run it started; whether that is still there is read with it, so a
        # page or the CLI does not send anyone to a job the retention (or rm) deleted since
        gone = or_(and_(ranked.c.job_id.is_not(None), j.c.id.is_(None)),
                   and_(ranked.c.run_id.is_not(None), p.c.id.is_(None))).label("gone")
        query = (select(ranked, gone).select_from(ranked.outerjoin(j, j.c.id == ranked.c.job_id)
                                                  .outerjoin(p, p.c.id == ranked.c.run_id))
                 .where(ranked.c.n <= limit).order_by(ranked.c.schedule_id, ranked.c.n))
        with self.store.read() as s:
            rows = s.connection().execute(query).mappings().all()
        for r in rows:
            out[r["schedule_id"]].append(ScheduleRun(**{k: r[k] for k in ScheduleRun.model_fields}))
        return out

    def active(self, schedule_ids: list[str]) -> dict[str, list[str]]:
        """The jobs (and pipeline runs) each schedule started that have not ended, oldest first."""
        out: dict[str, list[str]] = {i: [] for i in schedule_ids}
        if not schedule_ids:
            return out
        j, p = t.Job.__table__, t.PipelineRun.__table__
        started = (_R.c.schedule_id.in_(schedule_ids), _R.c.outcome == "started")
        jobs = (select(_R.c.id, _R.c.schedule_id, _R.c.job_id).join(j, j.c.id == _R.c.job_id)
                .where(*started, j.c.status.notin_(ENDED)))
        runs = (select(_R.c.id, _R.c.schedule_id, _R.c.run_id).join(p, p.c.id == _R.c.run_id)
                .where(*started, p.c.status.in_(LIVE_RUN)))
        with self.store.read() as s:
            found = sorted([*s.connection().execute(jobs), *s.connection().execute(runs)])
        for _, sid, key in found:
            out[sid].append(key)
        return out


def _seen(visible: Visible | None) -> Any:
    """The schedules a caller may see: all (``None`` or an admin), else their teams' and their own."""
    return _S.c.id.isnot(None) if visible is None or visible.teams is None else visible_where(_S.c, visible)
