"""What :meth:`Store.write` yields: the transaction's connection at once, an ORM session on it only when asked.

The hot writes (a submit, a cycle's admissions, a launcher's report) run Core statements on
``connection()``; an ORM ``Session`` around each of them cost more than their SQL (an empty
write: 127 µs of CPU through a Session, 34 µs this way; bench/RESULTS.md, session 31). Writers that use the ORM (``add``, ``get``, ``execute`` of an ORM statement…) reach a Session
bound to the same connection, made at their first use and flushed before the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session


class WriteTx:
    __slots__ = ("_conn", "_make", "_orm", "info")

    def __init__(self, conn: Connection, make: Callable[..., Session]) -> None:
        self._conn, self._make, self._orm = conn, make, None
        self.info: dict[str, Any] = {}  # as Session.info: what the writers leave for after the commit

    def connection(self) -> Connection:
        return self._conn

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # a protocol looked up (copy, pickle…): no Session for that
            raise AttributeError(name)
        if self._orm is None:
            # rollback_only: it writes on our transaction and never commits it; a rollback of its own ends it
            self._orm = self._make(bind=self._conn, join_transaction_mode="rollback_only")
        return getattr(self._orm, name)

    def done(self) -> None:
        """Before the commit: what the ORM session holds is written."""
        if self._orm is not None:
            self._orm.flush()

    def close(self) -> None:
        if self._orm is not None:
            self._orm.close()
