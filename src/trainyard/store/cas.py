"""Compare-and-set: every status change is one ``UPDATE … WHERE key AND status IN (the statuses the
transition table lets move to the new one)``, checked on its row count, with no read first."""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, literal_column, update
from sqlalchemy.orm import Session
from sqlalchemy.sql import ClauseElement

from trainyard.status import AttemptStatus, JobStatus, sources
from trainyard.store import tables as t

# Who moves a job to each status unless the caller says otherwise (recorded with the event).
ACTOR = {JobStatus.STARTING: "scheduler", JobStatus.PENDING: "scheduler", JobStatus.RUNNING: "launcher",
         JobStatus.CANCELLING: "user", JobStatus.CANCELLED: "user", JobStatus.SUCCEEDED: "launcher",
         JobStatus.FAILED: "launcher"}

_CAS: dict[tuple, Any] = {}


class IfUnset(NamedTuple):
    """A value a compare-and-set writes only where the column is still NULL (``coalesce(column, value)``)."""

    value: Any


def cas_statement(table: Any, by_replica: bool, new: JobStatus | AttemptStatus, names: tuple[str, ...],
                  if_unset: frozenset[str] = frozenset()) -> Any:
    """The compare-and-set ``UPDATE`` for one table, target status and set of columns, built once
    with bound parameters (``k_`` the key, ``v_`` the values): building it anew on every status
    change cost more CPU than running it. Columns in ``if_unset`` keep a value they already have."""
    found = _CAS.get((table.name, by_replica, new, names, if_unset))
    if found is None:
        c = table.c
        key = ([c.attempt_id == bindparam("k_attempt_id"), c.index == bindparam("k_index")] if by_replica
               else [c.id == bindparam("k_id")])
        bound = {n: bindparam("v_" + n, type_=c[n].type) for n in names}
        # the statuses written into the SQL: a bound list is expanded anew on every execution
        # (SQLAlchemy's post-compile step), which doubled the cost of running the statement
        statuses = [literal_column(f"'{old}'") for old in sources(new)]  # our own enum's values
        found = update(table).where(*key, c.status.in_(statuses)).values(
            status=new.value, **{n: func.coalesce(c[n], b) if n in if_unset else b for n, b in bound.items()})
        _CAS[(table.name, by_replica, new, names, if_unset)] = found
    return found


def cas(s: Session, model: type, key: Any, new: JobStatus | AttemptStatus, **values: Any) -> bool:
    """Move ``key`` to ``new`` if the table allows it from the status it has now.

    One ``UPDATE … WHERE key AND status IN (the statuses the table lets move
    to new)``, checked on its row count: whatever another loop did first,
    this either applies to what it found or changes nothing. False when
    the row is gone, terminal, or in a status that may not move to ``new``.
    """
    if model is t.Job:
        values.setdefault("updated_at", time.time())
        values.setdefault("status_by", ACTOR.get(new, "system"))  # the events trigger reads it
    table = model.__table__
    if any(isinstance(v, ClauseElement) for v in values.values()):  # an SQL expression (a column): built here
        keys = ([table.c.attempt_id == key[0], table.c.index == key[1]] if isinstance(key, tuple)
                else [table.c.id == key])
        stmt = update(table).where(*keys, table.c.status.in_(sources(new))).values(status=new.value, **values)
        return s.connection().execute(stmt).rowcount == 1
    params = {"k_" + k: v for k, v in zip(("attempt_id", "index") if isinstance(key, tuple) else ("id",),
                                           key if isinstance(key, tuple) else (key,))}
    if_unset = frozenset(k for k, v in values.items() if isinstance(v, IfUnset))
    params.update(("v_" + k, v.value if k in if_unset else v) for k, v in values.items())
    stmt = cas_statement(table, isinstance(key, tuple), new, tuple(values), if_unset)
    # a Core UPDATE on the session's connection: the ORM's bulk-update path costs more than the
    # statement itself, and readers use populate_existing, so there are no session objects to sync
    return s.connection().execute(stmt, params).rowcount == 1
