"""Sweeps: one row each, and one row per trial naming its job.

A sweep's status moves only from running (a compare-and-set); a trial's row is
written by the leader's sweep loop, and its state too moves only from running.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from sqlalchemy import func, insert, or_, select, update

from trainyard.auth.permissions import Visible
from trainyard.errors import SweepNotFound
from trainyard.spec.sweep import SweepSpec, SweepStatus, TrialInfo, TrialState
from trainyard.spec.submitted import STORED
from trainyard.status import JobStatus
from trainyard.store import Store
from trainyard.store import tables as t
from trainyard.spec.paging import Paging
from trainyard.store.paging import cut, paged
from trainyard.store.store import visible_where
from trainyard.store.tx import WriteTx

_S, _T = t.Sweep.__table__, t.SweepTrial.__table__
_TRIAL_COLUMNS = [_T.c[k] for k in TrialInfo.model_fields]


class SweepEnded(Exception):
    """The sweep a trial was being added to has ended: nothing was stored."""


class SweepRow(dict):
    """A row as a dict, its spec parsed (``row["spec"]`` is a :class:`SweepSpec`) and its status an enum."""


class SweepStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, spec: SweepSpec, snapshot: str | None, owner: str | None, team: str | None) -> str:
        now = time.time()
        with self.store.write() as s:
            seq = (s.scalar(select(func.max(_S.c.seq))) or 0) + 1
            row = dict(id="s-" + secrets.token_hex(5), seq=seq, name=spec.name, status=SweepStatus.RUNNING.value,
                       spec=spec.model_dump(mode="json"), snapshot=snapshot, owner=owner, team=team,
                       reason="starting its first trials", created_at=now, updated_at=now, ended_at=None)
            s.connection().execute(insert(_S), [row])
        return row["id"]

    def get(self, sweep_id: str) -> SweepRow:
        found = self._rows(_S.c.id == sweep_id)
        if not found:
            raise SweepNotFound(f"no such sweep: {sweep_id}", sweep=sweep_id)
        return found[0]

    def find(self, key: str, visible: Visible | None = None) -> SweepRow:
        """A sweep by id, else by name (the newest running one, else the newest), among those the caller sees."""
        seen = _seen(visible)
        found = self._rows((_S.c.id == key) & seen) or self._rows((_S.c.name == key) & seen)
        if not found:
            raise SweepNotFound(f"no such sweep: {key}", sweep=key)
        live = [r for r in found if r["status"] is SweepStatus.RUNNING]
        return (live or found)[-1]

    def list(self, include_ended: bool = True, visible: Visible | None = None,
             paging: Paging | None = None) -> list[SweepRow]:
        """Oldest first; with ``paging``, one page newest first (its cursor: :meth:`page`)."""
        where = _seen(visible)
        if not include_ended:
            where = where & (_S.c.status == SweepStatus.RUNNING.value)
        return self._rows(where, paging)

    def page(self, include_ended: bool, visible: Visible | None, paging: Paging) -> tuple[list[SweepRow], str | None]:
        return cut(self.list(include_ended, visible, paging), paging, lambda r: r["seq"])

    def live(self) -> list[SweepRow]:
        return self.list(include_ended=False)

    def _rows(self, where: Any, paging: Paging | None = None) -> list[SweepRow]:
        q = select(_S).where(where).order_by(_S.c.seq)
        with self.store.read() as s:
            rows = s.connection().execute(q if paging is None else paged(q, _S.c.seq, paging)).mappings().all()
        return [SweepRow({**r, "status": SweepStatus(r["status"]),
                          "spec": SweepSpec.model_validate(r["spec"], context=STORED)}) for r in rows]

    def end(self, sweep_id: str, status: SweepStatus, reason: str, trials_reason: str) -> list[str] | None:
        """Move a running sweep to ``status`` and its running trials to cancelled (``trials_reason``) in one
        transaction: the jobs of those trials, for the caller to stop; None if it had already ended. Their stop
        is not in the transaction: one a crash loses, :meth:`strays` finds."""
        now = time.time()
        running = (_T.c.sweep_id == sweep_id, _T.c.state == TrialState.RUNNING.value)
        with self.store.write() as s:
            stmt = (update(_S).where(_S.c.id == sweep_id, _S.c.status == SweepStatus.RUNNING.value)
                    .values(status=status.value, reason=reason, updated_at=now, ended_at=now))
            if s.connection().execute(stmt).rowcount != 1:
                return None
            jobs = list(s.connection().execute(select(_T.c.job_id).where(*running)).scalars())
            s.connection().execute(update(_T).where(*running).values(state=TrialState.CANCELLED.value,
                                                                       reason=trials_reason, ended_at=now))
            return jobs

    def strays(self) -> list[tuple[str, str]]:
        """The jobs still live of trials that ended (cancelled, pruned) or of sweeps that did: their stop, which
        comes after the trial's end is stored, was lost to a crash (or is on its way). The leader's loop stops
        them. Each as (job id, why: the trial's reason and its sweep, as :func:`stop_reason` words it)."""
        j = t.Job.__table__
        live = [s.value for s in (JobStatus.PENDING, JobStatus.STARTING, JobStatus.RUNNING)]
        query = (select(_T.c.job_id, _T.c.reason, _T.c.sweep_id)
                 .join(j, j.c.id == _T.c.job_id).join(_S, _S.c.id == _T.c.sweep_id)
                 .where(j.c.status.in_(live), or_(_T.c.state != TrialState.RUNNING.value,
                                                  _S.c.status != SweepStatus.RUNNING.value)))
        with self.store.read() as s:
            rows = s.connection().execute(query)
            return [(job, stop_reason(why or "its trial ended", sid)) for job, why, sid in rows]

    def note(self, sweep_id: str, reason: str) -> None:
        """What a running sweep is doing now (shown by ``sweep show``)."""
        with self.store.write() as s:
            s.connection().execute(update(_S).where(_S.c.id == sweep_id, _S.c.status == SweepStatus.RUNNING.value,
                                                    _S.c.reason.is_distinct_from(reason))
                                   .values(reason=reason, updated_at=time.time()))

    # -- trials ---------------------------------------------------------------------

    def trials(self, sweep_id: str) -> list[TrialInfo]:
        return self.trials_of([sweep_id]).get(sweep_id, [])

    def trials_of(self, sweep_ids: list[str]) -> dict[str, list[TrialInfo]]:
        """The trials of each sweep, by number, in one read (without what the pruner was told)."""
        out: dict[str, list[TrialInfo]] = {}
        if not sweep_ids:
            return out
        with self.store.read() as s:
            rows = s.connection().execute(select(_T.c.sweep_id, *_TRIAL_COLUMNS).where(_T.c.sweep_id.in_(sweep_ids))
                                          .order_by(_T.c.sweep_id, _T.c.number)).mappings().all()
        for r in rows:
            out.setdefault(r["sweep_id"], []).append(TrialInfo(**{k: r[k] for k in TrialInfo.model_fields}))
        return out

    def reported(self, sweep_id: str, number: int) -> dict[int, float]:
        """What the pruner was told of a running trial, step by step (its memory across a restart)."""
        with self.store.read() as s:
            got = s.scalar(select(_T.c.reported).where(_T.c.sweep_id == sweep_id, _T.c.number == number))
        return {int(k): float(v) for k, v in (got or {}).items()}

    def add_trial(self, tx: WriteTx, sweep_id: str, number: int, job_id: str, params: dict[str, Any]) -> None:
        """Trial ``number``'s row, in ``tx``: the transaction that stores its job (``Store.create_job``'s
        ``link``), so a crash never leaves a job of the sweep that it does not know (it would run beside the
        trial submitted again in its place). :class:`SweepEnded`, storing neither, if the sweep has ended: the
        sweep's row is written first, so a cancel committing meanwhile is waited for and seen."""
        now = time.time()
        alive = (update(_S).where(_S.c.id == sweep_id, _S.c.status == SweepStatus.RUNNING.value)
                 .values(updated_at=now))
        if tx.connection().execute(alive).rowcount != 1:
            raise SweepEnded(sweep_id)
        tx.connection().execute(insert(_T), [dict(sweep_id=sweep_id, number=number, job_id=job_id, params=params,
                                                  state=TrialState.RUNNING.value, value=None, step=None, reported={},
                                                  reason=None, created_at=now, ended_at=None)])

    def update_trial(self, sweep_id: str, number: int, **values: Any) -> bool:
        """Write a running trial's columns (with ``state`` a final one, its end); False if it had ended."""
        if "state" in values:
            values["state"] = TrialState(values["state"]).value
            if values["state"] != TrialState.RUNNING.value:
                values.setdefault("ended_at", time.time())
        if "reported" in values:
            values["reported"] = {str(k): v for k, v in values["reported"].items()}
        with self.store.write() as s:
            stmt = (update(_T).where(_T.c.sweep_id == sweep_id, _T.c.number == number,
                                     _T.c.state == TrialState.RUNNING.value).values(**values))
            return s.connection().execute(stmt).rowcount == 1


def _seen(visible: Visible | None) -> Any:
    """The sweeps a caller may see: all (``None`` or an admin), else their teams' and their own."""
    return _S.c.id.isnot(None) if visible is None or visible.teams is None else visible_where(_S.c, visible)


def stop_reason(trial_reason: str, sweep_id: str) -> str:
    """A trial's job's reason when its sweep stops it: the trial's own, and which sweep."""
    return f"{trial_reason} (sweep {sweep_id})"
