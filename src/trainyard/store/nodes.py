"""Node cordons: one row per node an admin took out of scheduling."""

from __future__ import annotations

import time

from sqlalchemy import delete, insert, select, update

from trainyard.spec.records import NodeCordon
from trainyard.store import Store
from trainyard.store import node_tables as nt

_C = nt.NodeCordon.__table__


class NodeCordonStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def all(self) -> dict[str, NodeCordon]:
        with self.store.read() as s:
            rows = s.connection().execute(select(_C)).mappings().all()
        return {r["node"]: NodeCordon(reason=r["reason"], by=r["by"], at=r["at"], drained_at=r["drained_at"])
                for r in rows}

    def cordon(self, node: str, reason: str | None, by: str | None, drained: bool = False) -> NodeCordon:
        """Cordon ``node`` (again: a new reason replaces the old, the first time is kept); the cordon as stored."""
        now = time.time()
        with self.store.write() as s:
            conn = s.connection()
            row = conn.execute(select(_C).where(_C.c.node == node)).mappings().first()
            if row is None:
                values = dict(node=node, reason=reason, by=by, at=now, drained_at=now if drained else None)
                conn.execute(insert(_C), [values])
            else:
                values = dict(row)
                changes = {"reason": reason, "by": by} if reason is not None else {}
                if drained:
                    changes["drained_at"] = now
                if changes:
                    conn.execute(update(_C).where(_C.c.node == node).values(**changes))
                values.update(changes)
        return NodeCordon(reason=values["reason"], by=values["by"], at=values["at"], drained_at=values["drained_at"])

    def uncordon(self, node: str) -> bool:
        """Whether ``node`` was cordoned."""
        with self.store.write() as s:
            return s.connection().execute(delete(_C).where(_C.c.node == node)).rowcount == 1
