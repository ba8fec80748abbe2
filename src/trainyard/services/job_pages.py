"""Answers to the jobs listing, shared while the store has not changed.

A dashboard open in many browsers, or many clients polling, asks for the same
page again and again; with nothing written in between, each request read the
database and serialized its 50 jobs again, in a worker thread that held the GIL
against the event loop answering everyone else (bench/api_load.py: lists in 40
threads at once were what kept a read of one job waiting). Here the first
request for a page of a given version of the store reads it, the ones arriving
meanwhile await that same read, and later ones get its text until the next
write. Where the store cannot tell (its ``version`` is None), every request reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable

from trainyard.services.notify import off_loop
from trainyard.store.cache import Recent

PAGES = 64  # distinct pages kept (query × who may see what): a few dashboards' filters and sorts


class PageCache:
    def __init__(self, size: int = PAGES) -> None:
        self._pages: Recent[tuple[int, asyncio.Future[str]]] = Recent(size)

    async def get(self, key: Hashable, version: int | None, read: Callable[[], str]) -> str:
        """The text ``read()`` returned for ``key`` at store ``version``, reading it (in a worker thread)
        if none is kept. ``version`` must be taken before the read starts: a write during the read then
        moves it on, and the next request reads again."""
        if version is None:
            return await off_loop(read)
        kept = self._pages.get(key)
        if kept is None or kept[0] != version:
            kept = (version, asyncio.ensure_future(off_loop(read)))
            kept[1].add_done_callback(lambda f, key=key, kept=kept: self._forget_failed(key, kept))
            self._pages.put(key, kept)
        # shielded: a client that hangs up does not cancel the read the others await
        return await asyncio.shield(kept[1])

    def _forget_failed(self, key: Hashable, kept: tuple[int, asyncio.Future[str]]) -> None:
        # an error is not kept (a bad query fails again on its own; the database may be back), and
        # looking at it here marks it retrieved when every waiter has gone
        if kept[1].cancelled() or kept[1].exception() is not None:
            self._pages.discard(key, kept)
