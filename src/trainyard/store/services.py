"""Services: one row each, and one row per replica job (what the leader's probes found).

Status changes are compare-and-sets against :data:`trainyard.spec.service.TRANSITIONS`;
the other columns are written by a request (spec, version, wanted) or by the
leader's service loop (wanted, replicas' readiness), each with one ``UPDATE``.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from sqlalchemy import delete, func, insert, select, update

from trainyard.auth.permissions import Visible
from trainyard.errors import ServiceNotFound
from trainyard.spec.service import ServiceSpec, ServiceStatus, service_sources
from trainyard.store import Store
from trainyard.store import tables as t
from trainyard.store.store import visible_where

LIVE = (ServiceStatus.RUNNING.value, ServiceStatus.STOPPING.value)
IDLE_REASON = "idle: no replica until a request comes (autoscale min 0)"
_S = t.Service.__table__
_R = t.ServiceReplicaRow.__table__


def new_service_id() -> str:
    return "s-" + secrets.token_hex(5)


class ServiceRow(dict):
    """A row as a dict, with its spec parsed (``row["spec"]`` is a :class:`ServiceSpec`)."""


class ReplicaRow(dict):
    """One replica job of a service: job_id, version, address, ready, draining_since, created_at."""


class ServiceStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, spec: ServiceSpec, snapshot: str | None, wanted: int, owner: str | None,
               team: str | None) -> str:
        now = time.time()
        with self.store.write() as s:
            seq = (s.scalar(select(func.max(_S.c.seq))) or 0) + 1
            row = dict(id=new_service_id(), seq=seq, name=spec.name, status=ServiceStatus.RUNNING.value,
                       queue=spec.queue, spec=spec.model_dump(mode="json"), snapshot=snapshot, version=1,
                       wanted=wanted, restarts=0, demand_at=None, owner=owner, team=team,
                       reason="starting its replicas" if wanted else IDLE_REASON,
                       created_at=now, updated_at=now, ended_at=None)
            s.connection().execute(insert(_S), [row])
        return row["id"]

    def live_named(self, name: str) -> ServiceRow | None:
        """The live service of that name, whoever owns it (a name is one address: /serve/NAME)."""
        found = self._rows((_S.c.name == name) & _S.c.status.in_(LIVE))
        return found[-1] if found else None

    def find(self, key: str, visible: Visible | None = None) -> ServiceRow:
        """A service by id, else by name (the live one, else the newest), among those the caller sees."""
        seen = _seen(visible)
        found = self._rows((_S.c.id == key) & seen) or self._rows((_S.c.name == key) & seen)
        if not found:
            raise ServiceNotFound(f"no such service: {key}", service=key)
        live = [r for r in found if r["status"].value in LIVE]
        return (live or found)[-1]

    def list(self, include_ended: bool = True, visible: Visible | None = None) -> list[ServiceRow]:
        return self._rows(_seen(visible) if include_ended else _S.c.status.in_(LIVE) & _seen(visible))

    def live(self) -> list[ServiceRow]:
        return self.list(include_ended=False)

    def _rows(self, where: Any) -> list[ServiceRow]:
        with self.store.read() as s:
            rows = s.connection().execute(select(_S).where(where).order_by(_S.c.seq)).mappings().all()
        return [ServiceRow({**r, "status": ServiceStatus(r["status"]), "spec": ServiceSpec.model_validate(r["spec"])})
                for r in rows]

    def move(self, service_id: str, new: ServiceStatus, **values: Any) -> bool:
        """``new`` if the transition table lets the service's status now move there; False otherwise."""
        now = time.time()
        if new.is_terminal():
            values.setdefault("ended_at", now)
        with self.store.write() as s:
            stmt = (update(_S).where(_S.c.id == service_id, _S.c.status.in_(service_sources(new)))
                    .values(status=new.value, updated_at=now, **values))
            return s.connection().execute(stmt).rowcount == 1

    def set(self, service_id: str, **values: Any) -> bool:
        """Write columns of a live service; False if it had ended."""
        with self.store.write() as s:
            stmt = (update(_S).where(_S.c.id == service_id, _S.c.status.in_(LIVE))
                    .values(updated_at=time.time(), **values))
            return s.connection().execute(stmt).rowcount == 1

    def crashed(self, service_id: str) -> None:
        """Count one more crashed replica (one ``UPDATE``: two servers' loops never lose a count)."""
        with self.store.write() as s:
            s.connection().execute(update(_S).where(_S.c.id == service_id).values(restarts=_S.c.restarts + 1))

    # -- replicas -------------------------------------------------------------------

    def add_replica(self, service_id: str, job_id: str, version: int, **values: Any) -> None:
        """Record a replica job, or write ``values`` into its row if it has one (its launch may come first)."""
        with self.store.write() as s:
            conn = s.connection()
            if values and conn.execute(update(_R).where(_R.c.job_id == job_id).values(**values)).rowcount:
                return
            if conn.execute(select(_R.c.job_id).where(_R.c.job_id == job_id)).first() is not None:
                return
            row = dict(job_id=job_id, service_id=service_id, version=version, address=None, ready=False,
                       draining_since=None, created_at=time.time())
            conn.execute(insert(_R), [{**row, **values}])

    def replicas(self, service_ids: list[str]) -> dict[str, list[ReplicaRow]]:
        """Each service's replica rows, oldest first."""
        out: dict[str, list[ReplicaRow]] = {i: [] for i in service_ids}
        if not service_ids:
            return out
        with self.store.read() as s:
            rows = s.connection().execute(select(_R).where(_R.c.service_id.in_(service_ids))
                                          .order_by(_R.c.created_at)).mappings().all()
        for r in rows:
            out[r["service_id"]].append(ReplicaRow(r))
        return out

    def set_replica(self, job_id: str, **values: Any) -> None:
        with self.store.write() as s:
            s.connection().execute(update(_R).where(_R.c.job_id == job_id).values(**values))

    def drop_replica(self, job_id: str) -> None:
        with self.store.write() as s:
            s.connection().execute(delete(_R).where(_R.c.job_id == job_id))


def _seen(visible: Visible | None) -> Any:
    """The services a caller may see: all (``None`` or an admin), else their teams' and their own."""
    return _S.c.id.isnot(None) if visible is None or visible.teams is None else visible_where(_S.c, visible)
