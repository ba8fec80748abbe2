"""Wake-ups for long polls and log streams, from any thread to asyncio waiters.

Keys are job ids (and pipeline run ids). ``notify`` bumps a version; ``wait``
returns as soon as the version moves past the one the waiter saw, or at the
timeout. Listeners (the pipeline runner) hear every key as it is notified.
A notify may carry the key's final state (a finished job as JSON), so the
long polls it wakes answer without reading it back: see :meth:`final`.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import OrderedDict, defaultdict
from typing import Any, Callable, TypeVar

from anyio.to_thread import run_sync

T = TypeVar("T")

# seconds: how often a long poll that may miss a change looks at the database again (a follower's
# long polls; on the leader, the jobs waited on, all in one read: trainyard.services.end_watch)
FOLLOWER_POLL = 1.0


class Notifier:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._versions: dict[str, int] = defaultdict(int)
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future]]] = defaultdict(list)
        self._listeners: list[Callable[[str], None]] = []
        self._final: OrderedDict[str, tuple[int, str]] = OrderedDict()  # key -> (version, state), newest last
        # longest one wait may sleep; set on a server that does not schedule, which hears no notify
        # for what the leader changes and must look at the database again
        self.max_wait: float | None = None

    def listen(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(key)`` on every notify, in the notifying thread: it must be quick and never block."""
        self._listeners.append(fn)

    def version(self, key: str) -> int:
        with self._lock:
            return self._versions[key]

    def notify(self, key: str, final: str | None = None) -> None:
        """Wake whoever waits on ``key``; ``final``: its state now, which no later change will alter."""
        with self._lock:
            self._versions[key] += 1
            if final is not None:
                self._final[key] = (self._versions[key], final)
                if len(self._final) > 1000:  # only recent ends matter: their waiters are about to ask
                    self._final.popitem(last=False)
            waiters = self._waiters.pop(key, [])
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_set, fut)
        for fn in self._listeners:
            fn(key)

    def waited(self) -> list[str]:
        """The keys someone waits on now."""
        with self._lock:
            return self._waited()

    def _waited(self) -> list[str]:  # under the lock
        return [key for key, waiters in self._waiters.items() if waiters]

    def final(self, key: str, seen: int) -> str | None:
        """The final state ``key`` was notified with, if it came after version ``seen``."""
        with self._lock:
            found = self._final.get(key)
            return found[1] if found is not None and found[0] > seen else None

    def look_again_every(self, seconds: float | None) -> None:
        """Set :attr:`max_wait`, and wake whoever waits now: a wait begun without a bound (on a leader)
        would otherwise sleep its whole timeout on a server that no longer hears the ends."""
        with self._lock:
            self.max_wait = seconds
            keys = self._waited() if seconds is not None else []
        for key in keys:
            self.notify(key)

    async def wait(self, key: str, seen: int, timeout: float) -> int:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:  # max_wait read with the waiters: look_again_every wakes any that began before it
            if self._versions[key] != seen:
                return self._versions[key]
            if self.max_wait is not None:
                timeout = min(timeout, self.max_wait)
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


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a worker thread: a waiter's store reads block, and on the event loop
    they would stall every other long poll and stream."""
    return await run_sync(functools.partial(fn, *args, **kwargs))


def _set(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
