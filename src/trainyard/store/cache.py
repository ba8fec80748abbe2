"""What the store keeps between reads, because it can no longer change.

- A job's spec never changes once written: reading a job back validated its
  spec from JSON every time, the largest part of listing a page of 50 jobs.
- A job that has ended never changes either (no transition leaves a terminal
  status, and its attempts ended with it): reading one again, as a dashboard
  or a client polling a list does, answers from memory. This holds across
  servers sharing one database too, since the row itself is final.

Bounded, so a store of millions of jobs keeps only the recently read ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Recent(Generic[V]):
    """A thread-safe map of the ``size`` most recently used keys."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            if len(self._items) > self.size:
                self._items.popitem(last=False)

    def discard(self, key: Hashable, value: V) -> None:
        """Forget ``key`` if it still holds ``value`` (not one put since)."""
        with self._lock:
            if self._items.get(key) is value:
                del self._items[key]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
