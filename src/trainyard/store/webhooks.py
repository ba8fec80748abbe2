"""Subscriptions, the deliveries they owe, and the events table read for them.

Events (one row per status change, written by database triggers) are turned into
deliveries in the transaction that moves the cursor past them: an event is owed
at most once per subscription (a unique key), and none is skipped by a server
that dies halfway.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, NamedTuple

from sqlalchemy import and_, delete, func, insert, null, or_, select, update

from trainyard.errors import NotFound
from trainyard.spec.paging import Paging
from trainyard.spec.webhooks import DeliveryInfo, SubscriptionCreate, SubscriptionInfo
from trainyard.store import Store
from trainyard.store import tables as t
from trainyard.store import webhook_tables as wt
from trainyard.store.paging import cut

_S, _D, _C = wt.Subscription.__table__, wt.Delivery.__table__, wt.Cursor.__table__
_DELIVERY = [_D.c[k] for k in DeliveryInfo.model_fields]
CURSOR = "webhooks"
# seconds a delivery taken to be sent is due to no one else: a loop takes as many as it sends at once, and each
# send's connect, write and read time out within 60 s each
CLAIM = 300.0
ENDS = ("succeeded", "failed", "cancelled")


class Ended(NamedTuple):
    """A job's (or pipeline run's) end, from the events table, with what a subscription filters on."""

    event_id: int
    kind: str  # job or pipeline_run
    object_id: str
    status: str
    reason: str | None
    at: float
    name: str
    queue: str | None  # a pipeline run has none
    team: str | None
    owner: str | None
    labels: dict[str, str] | None = None  # a job's (its spec's); a pipeline run has none


class WebhookStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    # -- subscriptions ----------------------------------------------------------------

    def subscribe(self, owner: str, req: SubscriptionCreate, team: str | None) -> str:
        row = dict(id="ws-" + secrets.token_hex(5), owner=owner, webhook=req.webhook, on=list(req.on), kind=req.kind,
                   scope=req.scope.value, team=team, queue=req.queue, name=req.name, labels=req.labels,
                   created_at=time.time())
        with self.store.write() as s:
            s.connection().execute(insert(_S), [row])
        return row["id"]

    def count(self, owner: str) -> int:
        with self.store.read() as s:
            return s.scalar(select(func.count()).select_from(_S).where(_S.c.owner == owner)) or 0

    def subscriptions(self, owner: str | None = None, counts: bool = True) -> list[SubscriptionInfo]:
        """Every subscription (``owner`` None), or one user's, with how their deliveries went (``counts``:
        the loop, which looks every few seconds, does without)."""
        return self._read(None if owner is None else _S.c.owner == owner, counts)

    def page(self, owner: str | None, paging: Paging) -> tuple[list[SubscriptionInfo], str | None]:
        """One page of :meth:`subscriptions`, newest first, and the next page's cursor (``created_at/id`` of its
        last: subscriptions have no creation number)."""
        where = None if owner is None else _S.c.owner == owner
        if paging.cursor:
            at, _, sid = paging.cursor.partition("/")
            below = or_(_S.c.created_at < float(at), and_(_S.c.created_at == float(at), _S.c.id < sid))
            where = below if where is None else where & below
        return cut(self._read(where, True, paging.limit + 1), paging, lambda i: f"{i.created_at!r}/{i.id}")

    def get(self, sub_id: str) -> SubscriptionInfo:
        found = self._read(_S.c.id == sub_id, counts=True)
        if not found:
            raise NotFound(f"no such subscription: {sub_id}", subscription=sub_id)
        return found[0]

    def _read(self, where: Any, counts: bool, newest: int | None = None) -> list[SubscriptionInfo]:
        """The subscriptions ``where`` picks (all: None), oldest first (with ``newest``: that many, newest first),
        their deliveries counted only for them."""
        q = select(_S).order_by(_S.c.created_at, _S.c.id)
        if newest is not None:
            q = q.order_by(None).order_by(_S.c.created_at.desc(), _S.c.id.desc()).limit(newest)
        if where is not None:
            q = q.where(where)
        with self.store.read() as s:
            rows = s.connection().execute(q).mappings().all()
            tally = select(_D.c.subscription_id, _D.c.status, func.count()).group_by(_D.c.subscription_id, _D.c.status)
            if newest is not None:  # a page's own: a few hundred ids
                tally = tally.where(_D.c.subscription_id.in_([r["id"] for r in rows]))
            elif where is not None:
                tally = tally.where(_D.c.subscription_id.in_(select(_S.c.id).where(where)))
            counts_of: dict[str, dict[str, int]] = {}
            for sid, status, n in (s.connection().execute(tally) if counts and rows else ()):
                counts_of.setdefault(sid, {})[status] = n
        return [SubscriptionInfo(**{k: r[k] for k in SubscriptionInfo.model_fields if k in r},
                                 delivered=counts_of.get(r["id"], {}).get("sent", 0),
                                 pending=counts_of.get(r["id"], {}).get("pending", 0),
                                 failed=counts_of.get(r["id"], {}).get("failed", 0)) for r in rows]

    def unsubscribe(self, sub_id: str) -> None:
        with self.store.write() as s:
            s.connection().execute(delete(_D).where(_D.c.subscription_id == sub_id, _D.c.status == "pending"))
            s.connection().execute(delete(_S).where(_S.c.id == sub_id))

    # -- events -> deliveries -----------------------------------------------------------

    def start_cursor(self) -> None:
        """A cursor at the newest event, if there is none: a first leader owes nothing from before."""
        with self.store.write() as s:
            if s.scalar(select(_C.c.event_id).where(_C.c.name == CURSOR)) is None:
                last = s.scalar(select(func.max(t.Event.__table__.c.id))) or 0
                s.connection().execute(insert(_C), [{"name": CURSOR, "event_id": last}])

    def ended_since(self, limit: int = 1000) -> tuple[int, int, list[Ended]]:
        """(the cursor, how far this read goes, the jobs' and pipeline runs' ends in between, oldest first): at
        most ``limit`` events read."""
        e, j, p = t.Event.__table__.c, t.Job.__table__.c, t.PipelineRun.__table__.c
        with self.store.read() as s:
            cursor = s.scalar(select(_C.c.event_id).where(_C.c.name == CURSOR)) or 0
            last = s.scalar(select(func.max(e.id)).where(e.id > cursor)) or cursor
            last = min(last, cursor + limit)
            ends = (e.id > cursor, e.id <= last, e.new_status.in_(ENDS))
            rows = [*s.connection().execute(
                select(e.id, e.kind, e.object_id, e.new_status, e.reason, e.ts, j.name, j.queue, j.team, j.owner,
                       j.spec["labels"]).join(t.Job.__table__, j.id == e.object_id).where(*ends, e.kind == "job")),
                    *s.connection().execute(
                select(e.id, e.kind, e.object_id, e.new_status, e.reason, e.ts, p.name, null(), p.team, p.owner)
                .join(t.PipelineRun.__table__, p.id == e.object_id).where(*ends, e.kind == "pipeline_run"))]
        return cursor, last, sorted(Ended(*r) for r in rows)

    def owe(self, cursor: int, upto: int, deliveries: list[dict[str, Any]]) -> bool:
        """Record ``deliveries`` and move the cursor from ``cursor`` to ``upto``, in one transaction;
        False (nothing written) if another server moved it first."""
        with self.store.write() as s:
            moved = s.connection().execute(update(_C).where(_C.c.name == CURSOR, _C.c.event_id == cursor)
                                           .values(event_id=upto)).rowcount == 1
            if moved and deliveries:
                now = time.time()
                s.connection().execute(insert(_D), [{**d, "status": "pending", "attempts": 0, "next_at": now,
                                                     "last_error": None, "created_at": now, "sent_at": None}
                                                    for d in deliveries])
            return moved

    # -- sending ----------------------------------------------------------------------

    def due(self, now: float, limit: int) -> list[dict[str, Any]]:
        """Deliveries due at ``now``, each taken for ``CLAIM`` seconds (its ``next_at`` moved on, compare-and-set)
        so that one sender alone sends it: a cycle of another loop at the same moment (a second server's, a
        test's) skips it, and one neither sent nor retried by then (its server died mid-send) is due again."""
        query = select(_D).where(_D.c.next_at <= now).order_by(_D.c.next_at, _D.c.id).limit(limit)
        with self.store.read() as s:  # most cycles find none: no writer's turn for them
            if not s.connection().execute(query.with_only_columns(_D.c.id)).first():
                return []
        with self.store.write() as s:
            conn, taken = s.connection(), []
            for row in [dict(r) for r in conn.execute(query).mappings()]:
                # still due: not taken by another sender since this read (no float compared for equality)
                if conn.execute(update(_D).where(_D.c.id == row["id"], _D.c.next_at <= now)
                                .values(next_at=now + CLAIM)).rowcount == 1:
                    taken.append(row)
            return taken

    def next_due(self) -> float | None:
        with self.store.read() as s:
            return s.scalar(select(func.min(_D.c.next_at)))

    def sent(self, delivery_id: int, attempts: int) -> None:
        self._set(delivery_id, status="sent", attempts=attempts, next_at=None, sent_at=time.time(), last_error=None)

    def retry(self, delivery_id: int, attempts: int, error: str, next_at: float | None) -> None:
        """Another try at ``next_at``, or (None) given up."""
        self._set(delivery_id, status="pending" if next_at is not None else "failed", attempts=attempts,
                  next_at=next_at, last_error=error[:1000])

    def _set(self, delivery_id: int, **values: Any) -> None:
        with self.store.write() as s:
            s.connection().execute(update(_D).where(_D.c.id == delivery_id).values(**values))

    def forget(self, before: float) -> int:
        """Delete the deliveries sent or given up before ``before``; how many."""
        with self.store.write() as s:
            return s.connection().execute(delete(_D).where(_D.c.status != "pending",
                                                           _D.c.created_at < before)).rowcount

    def deliveries(self, sub_id: str, limit: int = 50) -> list[DeliveryInfo]:
        with self.store.read() as s:
            rows = s.connection().execute(select(*_DELIVERY).where(_D.c.subscription_id == sub_id)
                                          .order_by(_D.c.id.desc()).limit(limit)).mappings().all()
        return [DeliveryInfo(**r) for r in rows]


def unannounced(conn, kind: str, ids: list[str]) -> set[str]:  # noqa: ANN001
    """Of ``ids`` (jobs, or pipeline runs), those whose end the webhooks have not read yet: deleted now, their
    deliveries would be lost (a payload is made from the row). None while no one subscribes to ``kind``."""
    if not ids or conn.execute(select(_S.c.id).where(_S.c.kind == kind).limit(1)).first() is None:
        return set()
    cursor = conn.execute(select(_C.c.event_id).where(_C.c.name == CURSOR)).scalar()
    if cursor is None:
        return set()
    e = t.Event.__table__.c
    return set(conn.execute(select(e.object_id).distinct().where(
        e.id > cursor, e.kind == kind, e.object_id.in_(ids), e.new_status.in_(ENDS))).scalars())
