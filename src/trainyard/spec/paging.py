"""One page of a listing (sweeps, services, schedules, clusters, subscriptions), newest first, as jobs and pipeline
runs are listed: at most ``limit`` items, and the cursor that continues below the last of them."""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

from pydantic import BaseModel, Field

LIST_LIMIT = 50  # items of a page unless asked for another number
LIST_MAX = 500  # the most one page holds: no request reads a whole table into the server's memory
SEQ_CURSOR = r"^[0-9]{1,18}$"  # the creation number of the last item of the page before

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(None, description="pass as cursor for the next page; none: this is the last")


class Paging(NamedTuple):
    limit: int = LIST_LIMIT
    cursor: str | None = None  # a page's next_cursor: the items after (older than) its last
