"""The listings that page newest first (sweeps, services, schedules, clusters, subscriptions): one page, or every
item page after page, as :meth:`trainyard.sdk.client.Client.iter_jobs` walks jobs."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from trainyard.spec.paging import LIST_LIMIT, LIST_MAX, Page

M = TypeVar("M", bound=BaseModel)


def page(http: Any, path: str, model: type[M], *, limit: int = LIST_LIMIT, cursor: str | None = None,
         **params: Any) -> Page[M]:
    """One page of ``path``: at most ``limit`` items (the server's bound: 500), newest first; its
    ``next_cursor`` passed as ``cursor`` gives the next."""
    query = {**params, "limit": limit, **({"cursor": cursor} if cursor else {})}
    return Page[model].model_validate_json(http.request("GET", path, params=query).content)  # type: ignore[valid-type]


def every(http: Any, path: str, model: type[M], *, limit: int | None = None, **params: Any) -> list[M]:
    """The items of ``path``, newest first, read a page at a time: all of them, or the first ``limit``."""
    items: list[M] = []
    cursor = None
    while limit is None or len(items) < limit:
        got = page(http, path, model, limit=LIST_MAX if limit is None else min(LIST_MAX, limit - len(items)),
                   cursor=cursor, **params)
        items += got.items
        cursor = got.next_cursor
        if not cursor:
            break
    return items
