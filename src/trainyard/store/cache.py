"""What the store keeps between reads, because it can no longer change, or says when it did.

- A job's spec never changes once written but for its labels (``trainyard label``), and each change of those
  counts up ``jobs.labels_rev``: reading a job back validated its spec from JSON every time, the largest part
  of listing a page of 50 jobs, so a spec is kept with that count, and a read whose row says another reads it
  again (``store.rows.remembered``).
- A job that has ended changes only its labels (no transition leaves a terminal
  status, and its attempts ended with it): reading one again, as a dashboard
  or a client polling a list does, answers from memory. Across servers sharing
  one database, another server's change of labels, or delete (``trainyard rm``,
  the ``jobs`` retention), shows within a minute: a server keeps an ended job
  that long at most (a listing, which reads the row, sees a change at once).

Bounded, so a store of millions of jobs keeps only the recently read ones.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Recent(Generic[V]):
    """A thread-safe map of the ``size`` most recently used keys."""

    def __init__(self, size: int, ttl: float | None = None) -> None:
        """``ttl``: seconds a value is kept after it was put (None: until pushed out by newer ones)."""
        self.size = size
        self.ttl = ttl
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._until: dict[Hashable, float] = {}  # with a ttl: when each value is no longer answered

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                if self.ttl is not None and time.monotonic() > self._until[key]:
                    del self._items[key], self._until[key]
                    return None
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            if self.ttl is not None:
                self._until[key] = time.monotonic() + self.ttl
            if len(self._items) > self.size:
                old, _ = self._items.popitem(last=False)
                self._until.pop(old, None)

    def discard(self, key: Hashable, value: V) -> None:
        """Forget ``key`` if it still holds ``value`` (not one put since)."""
        with self._lock:
            if self._items.get(key) is value:
                del self._items[key]
                self._until.pop(key, None)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._items.pop(key, None)
            self._until.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._until.clear()
