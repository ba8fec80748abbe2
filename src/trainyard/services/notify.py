"""Wake-ups for long polls and log streams, from any thread to asyncio waiters.

Keys are job ids (and pipeline run ids). ``notify`` bumps a version; ``wait``
returns as soon as the version moves past the one the waiter saw, or at the
timeout. Listeners (the pipeline runner) hear every key as it is notified.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Callable


class Notifier:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._versions: dict[str, int] = defaultdict(int)
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future]]] = defaultdict(list)
        self._listeners: list[Callable[[str], None]] = []

    def listen(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(key)`` on every notify, in the notifying thread: it must be quick and never block."""
        self._listeners.append(fn)

    def version(self, key: str) -> int:
        with self._lock:
            return self._versions[key]

    def notify(self, key: str) -> None:
        with self._lock:
            self._versions[key] += 1
            waiters = self._waiters.pop(key, [])
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_set, fut)
        for fn in self._listeners:
            fn(key)

    async def wait(self, key: str, seen: int, timeout: float) -> int:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:
            if self._versions[key] != seen:
                return self._versions[key]
            self._waiters[key].append((loop, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            with self._lock:
                entries = self._waiters.get(key, [])
                if (loop, fut) in entries:
                    entries.remove((loop, fut))
                if not entries:
                    self._waiters.pop(key, None)
        return self.version(key)


def _set(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
