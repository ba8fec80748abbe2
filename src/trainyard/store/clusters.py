"""Dask clusters: one row each, naming its scheduler job and its live worker jobs.

Status changes are compare-and-sets against :data:`trainyard.spec.cluster.TRANSITIONS`;
the other columns are written by the leader's cluster loop (jobs, address) or by a
request (wanted workers, adaptive bounds), each with one ``UPDATE``.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from sqlalchemy import delete, func, insert, select, update

from trainyard.auth.permissions import Visible
from trainyard.errors import ClusterNotFound
from trainyard.spec.cluster import ClusterSpec, ClusterStatus, cluster_sources
from trainyard.spec.submitted import STORED
from trainyard.store import Store
from trainyard.store import tables as t
from trainyard.spec.paging import Paging
from trainyard.store.paging import cut, paged
from trainyard.store.store import IN_BATCH, visible_where

LIVE = (ClusterStatus.PENDING.value, ClusterStatus.RUNNING.value, ClusterStatus.STOPPING.value)


def new_cluster_id() -> str:
    return "c-" + secrets.token_hex(5)


class ClusterRow(dict):
    """A row as a dict, with its spec parsed (``row["spec"]`` is a :class:`ClusterSpec`)."""


class ClusterStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, spec: ClusterSpec, owner: str | None = None, team: str | None = None,
               tls: str | None = None, cluster_id: str | None = None) -> str:
        """A new cluster; ``tls``: its sealed TLS identity (None: its Dask speaks plain TCP)."""
        now = time.time()
        workers = spec.workers if spec.adapt_min is None else max(spec.adapt_min, min(spec.workers, spec.adapt_max))
        with self.store.write() as s:
            seq = (s.scalar(select(func.max(t.DaskCluster.seq))) or 0) + 1
            row = dict(id=cluster_id or new_cluster_id(), seq=seq, name=spec.name, status=ClusterStatus.PENDING.value,
                       queue=spec.queue, spec=spec.model_dump(mode="json"), workers=workers,
                       adapt_min=spec.adapt_min, adapt_max=spec.adapt_max, scheduler_job=None, worker_jobs=[],
                       address=None, dashboard=None, tls=tls, owner_job=spec.owner_job, owner=owner, team=team,
                       reason="starting its Dask scheduler", created_at=now, updated_at=now, ended_at=None)
            s.connection().execute(insert(t.DaskCluster.__table__), [row])
        return row["id"]

    def get(self, cluster_id: str) -> ClusterRow:
        found = self._rows(t.DaskCluster.__table__.c.id == cluster_id)
        if not found:
            raise ClusterNotFound(f"no such cluster: {cluster_id}", cluster_id=cluster_id)
        return found[0]

    def find(self, key: str, visible: Visible | None = None) -> ClusterRow:
        """A cluster by id, else by name (the newest one not ended, else the newest), among those
        ``visible`` lets the caller see: another team's cluster is not found."""
        c = t.DaskCluster.__table__.c
        seen = _seen(visible)
        found = self._rows((c.id == key) & seen) or self._rows((c.name == key) & seen)
        if not found:
            raise ClusterNotFound(f"no such cluster: {key}", cluster=key)
        live = [r for r in found if r["status"] in LIVE]
        return (live or found)[-1]

    def list(self, include_ended: bool = True, visible: Visible | None = None,
             paging: Paging | None = None) -> list[ClusterRow]:
        """Oldest first; with ``paging``, one page newest first (its cursor: :meth:`page`)."""
        c = t.DaskCluster.__table__.c
        return self._rows(_seen(visible) if include_ended else c.status.in_(LIVE) & _seen(visible), paging)

    def page(self, include_ended: bool, visible: Visible | None,
             paging: Paging) -> tuple[list[ClusterRow], str | None]:
        return cut(self.list(include_ended, visible, paging), paging, lambda r: r["seq"])

    def live(self) -> list[ClusterRow]:
        return self.list(include_ended=False)

    def _rows(self, where: Any, paging: Paging | None = None) -> list[ClusterRow]:
        table = t.DaskCluster.__table__
        q = select(table).where(where).order_by(table.c.seq)
        with self.store.read() as s:
            rows = s.connection().execute(q if paging is None else paged(q, table.c.seq, paging)).mappings().all()
        return [ClusterRow({**r, "status": ClusterStatus(r["status"]),
                            "spec": ClusterSpec.model_validate(r["spec"], context=STORED),
                            "worker_jobs": list(r["worker_jobs"] or [])}) for r in rows]

    def expired(self, before: float, limit: int, kept: set[str]) -> tuple[list[str], list[str]]:
        """Up to ``limit`` clusters that ended by ``before`` (those in ``kept`` left out), oldest first, and
        which of them name no job that is left (scheduler, workers): their record is all there is of them."""
        c, j = t.DaskCluster.__table__.c, t.Job.__table__.c
        with self.store.read() as s:
            conn = s.connection()
            rows = conn.execute(select(c.id, c.scheduler_job, c.worker_jobs)
                                .where(c.status.notin_(LIVE), c.ended_at <= before, c.id.notin_(kept))
                                .order_by(c.ended_at, c.id).limit(limit)).all()
            named = sorted({jid for _, scheduler, workers in rows for jid in (scheduler, *(workers or ())) if jid})
            left: set[str] = set()
            for k in range(0, len(named), IN_BATCH):
                left.update(conn.execute(select(j.id).where(j.id.in_(named[k:k + IN_BATCH]))).scalars())
        return ([r.id for r in rows],
                [r.id for r in rows if not left & {r.scheduler_job, *(r.worker_jobs or ())}])

    def delete(self, cluster_ids: list[str]) -> int:
        """Delete the records of ended clusters (one still live is left as it is); how many went."""
        c = t.DaskCluster.__table__.c
        with self.store.write() as s:
            return s.connection().execute(delete(t.DaskCluster.__table__).where(
                c.id.in_(cluster_ids), c.status.notin_(LIVE))).rowcount

    def move(self, cluster_id: str, new: ClusterStatus, **values: Any) -> bool:
        """``new`` if the transition table lets the cluster's status now move there; False otherwise."""
        now = time.time()
        if new.is_terminal():
            values.setdefault("ended_at", now)
        c = t.DaskCluster.__table__.c
        with self.store.write() as s:
            stmt = (update(t.DaskCluster.__table__).where(c.id == cluster_id, c.status.in_(cluster_sources(new)))
                    .values(status=new.value, updated_at=now, **values))
            return s.connection().execute(stmt).rowcount == 1

    def set(self, cluster_id: str, *, only_live: bool = True, **values: Any) -> bool:
        """Write columns of a cluster that has not ended (``only_live``); False if it had."""
        c = t.DaskCluster.__table__.c
        where = [c.id == cluster_id] + ([c.status.in_(LIVE)] if only_live else [])
        with self.store.write() as s:
            stmt = update(t.DaskCluster.__table__).where(*where).values(updated_at=time.time(), **values)
            return s.connection().execute(stmt).rowcount == 1


def _seen(visible: Visible | None) -> Any:
    """The clusters a caller may see: all (``None`` or an admin), else their teams' and their own."""
    c = t.DaskCluster.__table__.c
    return c.id.isnot(None) if visible is None or visible.teams is None else visible_where(c, visible)
