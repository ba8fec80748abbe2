"""Services: one row each, and one row per replica job (what the leader's probes found).

Status changes are compare-and-sets against :data:`trainyard.spec.service.TRANSITIONS`;
the other columns are written by a request (spec, version, wanted) or by the
leader's service loop (wanted, replicas' readiness), each with one ``UPDATE``.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, NamedTuple

from sqlalchemy import delete, func, insert, or_, select, update

from trainyard.auth.permissions import Visible
from trainyard.errors import ServiceNotFound
from trainyard.spec.service import ServiceSpec, ServiceStatus, service_sources
from trainyard.spec.submitted import STORED
from trainyard.status import JobStatus
from trainyard.store import Store
from trainyard.store import tables as t
from trainyard.spec.paging import Paging
from trainyard.store.paging import cut, paged
from trainyard.store.store import visible_where

LIVE = (ServiceStatus.RUNNING.value, ServiceStatus.STOPPING.value)
IDLE_REASON = "idle: no replica until a request comes (autoscale min 0)"
_S = t.Service.__table__
_R = t.ServiceReplicaRow.__table__


def new_service_id() -> str:
    # svc-, not the s- of sweeps' ids (which services had until then, and keep): `serve ID` and `download ID` take a
    # sweep's id for its best trial, and told a service's from none only by asking for both
    return "svc-" + secrets.token_hex(5)


class ServiceRow(dict):
    """A row as a dict, with its spec parsed (``row["spec"]`` is a :class:`ServiceSpec`)."""


class ReplicaRow(dict):
    """One replica job of a service: job_id, version, address, ready, draining_since, created_at, token (sealed)."""


class ReplicaJob(NamedTuple):
    """What the service loop looks at of a replica's job every tick: not the whole job."""

    id: str
    status: JobStatus
    reason: str | None
    started: float | None  # its last attempt's start, else that attempt's admission; None before any attempt


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

    def list(self, include_ended: bool = True, visible: Visible | None = None,
             paging: Paging | None = None) -> list[ServiceRow]:
        """Oldest first; with ``paging``, one page newest first (its cursor: :meth:`page`)."""
        return self._rows(_seen(visible) if include_ended else _S.c.status.in_(LIVE) & _seen(visible), paging)

    def page(self, include_ended: bool, visible: Visible | None,
             paging: Paging) -> tuple[list[ServiceRow], str | None]:
        return cut(self.list(include_ended, visible, paging), paging, lambda r: r["seq"])

    def _rows(self, where: Any, paging: Paging | None = None) -> list[ServiceRow]:
        q = select(_S).where(where).order_by(_S.c.seq)
        with self.store.read() as s:
            rows = s.connection().execute(q if paging is None else paged(q, _S.c.seq, paging)).mappings().all()
        return _parsed(rows)

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

    def tick_view(self) -> tuple[list[ServiceRow], dict[str, list[ReplicaRow]], dict[str, ReplicaJob]]:
        """The live services, each one's replica rows (oldest first) and those replicas' jobs, in one read: what
        the leader's service loop looks at 4 times a second. Read as the live services, :meth:`replicas` and a
        whole job per replica, one idle service cost that loop ~3 ms of CPU a tick (bench/RESULTS.md, session 21)."""
        with self.store.read() as s:
            conn = s.connection()
            rows = conn.execute(_LIVE_ROWS).mappings().all()
            if not rows:
                return [], {}, {}
            replicas = conn.execute(_LIVE_REPLICAS).mappings().all()
            jobs = conn.execute(_REPLICA_JOBS).all()
        services = _parsed(rows)
        out: dict[str, list[ReplicaRow]] = {r["id"]: [] for r in services}
        for r in replicas:
            if r["service_id"] in out:  # not a service made live since the first statement of this read
                out[r["service_id"]].append(ReplicaRow(r))
        return services, out, {i: ReplicaJob(i, JobStatus(status), reason, started if started is not None else admitted)
                               for i, status, reason, started, admitted in jobs}

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

    def replica_token(self, job_id: str) -> str | None:
        """The sealed token of the job's replica row (services/service_tokens.py); None without a row or token."""
        with self.store.read() as s:
            return s.connection().execute(select(_R.c.token).where(_R.c.job_id == job_id)).scalar()

    def set_replica(self, job_id: str, **values: Any) -> None:
        with self.store.write() as s:
            s.connection().execute(update(_R).where(_R.c.job_id == job_id).values(**values))

    def drop_replica(self, job_id: str) -> None:
        with self.store.write() as s:
            s.connection().execute(delete(_R).where(_R.c.job_id == job_id))


def _parsed(rows: Any) -> list[ServiceRow]:
    return [ServiceRow({**r, "status": ServiceStatus(r["status"]),
                        "spec": ServiceSpec.model_validate(r["spec"], context=STORED)}) for r in rows]


# the service loop's reads (tick_view), built once; statuses compared one by one, not with in_(): an expanding IN is
# bound anew at every execution, a quarter of a small read's CPU here
_LIVE_WHERE = or_(*(_S.c.status == status for status in LIVE))
_LIVE_ROWS = select(_S).where(_LIVE_WHERE).order_by(_S.c.seq)
_LIVE_REPLICAS = (select(_R).join(_S, _S.c.id == _R.c.service_id).where(_LIVE_WHERE)
                  .order_by(_R.c.created_at))
_J, _A = t.Job.__table__, t.Attempt.__table__
_EACH = _A.alias("each_attempt")
_LAST = select(func.max(_EACH.c.number)).where(_EACH.c.job_id == _J.c.id).correlate(_J).scalar_subquery()
_REPLICA_JOBS = (select(_J.c.id, _J.c.status, _J.c.reason, _A.c.started_at, _A.c.created_at)
                 .select_from(_R.join(_S, _S.c.id == _R.c.service_id).join(_J, _J.c.id == _R.c.job_id)
                              .outerjoin(_A, (_A.c.job_id == _J.c.id) & (_A.c.number == _LAST)))
                 .where(_LIVE_WHERE))


def _seen(visible: Visible | None) -> Any:
    """The services a caller may see: all (``None`` or an admin), else their teams' and their own."""
    return _S.c.id.isnot(None) if visible is None or visible.teams is None else visible_where(_S.c, visible)
