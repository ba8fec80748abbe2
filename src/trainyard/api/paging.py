"""``limit`` and ``cursor`` of the listings that page newest first (sweeps, services, schedules, clusters,
subscriptions): the same two parameters as jobs and pipeline runs, bounded so that no request lists a whole table."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

from trainyard.spec.paging import LIST_LIMIT, LIST_MAX, SEQ_CURSOR, Paging

# a subscription's place: its created_at (as Python writes a float) and its id
SUBSCRIPTION_CURSOR = r"^[0-9]{1,17}(\.[0-9]{1,17})?(e[+-]?[0-9]{1,3})?/ws-[0-9a-f]{1,32}$"

Limit = Annotated[int, Query(ge=1, le=LIST_MAX, description=f"items of this page, at most {LIST_MAX}")]


def _seq(limit: Limit = LIST_LIMIT, cursor: Annotated[str | None, Query(
        pattern=SEQ_CURSOR, description="next_cursor of the page before")] = None) -> Paging:
    return Paging(limit, cursor)


def _subscriptions(limit: Limit = LIST_LIMIT, cursor: Annotated[str | None, Query(
        pattern=SUBSCRIPTION_CURSOR, description="next_cursor of the page before")] = None) -> Paging:
    return Paging(limit, cursor)


PagingDep = Annotated[Paging, Depends(_seq)]
SubscriptionPagingDep = Annotated[Paging, Depends(_subscriptions)]
