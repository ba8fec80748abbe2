"""Pages of a table whose ``seq`` numbers its rows in creation order: newest first, keyset by ``seq``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import Select

from trainyard.spec.paging import Paging

R = TypeVar("R")


def paged(q: Select, seq: Any, paging: Paging) -> Select:
    """``q`` newest first from below the cursor, one row past the limit (whether a page follows)."""
    if paging.cursor:
        q = q.where(seq < int(paging.cursor))
    return q.order_by(None).order_by(seq.desc()).limit(paging.limit + 1)


def cut(rows: Sequence[R], paging: Paging, cursor_of: Callable[[R], Any]) -> tuple[list[R], str | None]:
    """The page's rows and the cursor of the next page (None: this is the last)."""
    more = len(rows) > paging.limit
    rows = list(rows[:paging.limit])
    return rows, (str(cursor_of(rows[-1])) if more and rows else None)
