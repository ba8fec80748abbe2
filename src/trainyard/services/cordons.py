"""The cordoned nodes as every part of one server sees them: read from the store at most once a second.

The leader's scheduler asks every cycle; an admin may cordon through any server, so the leader reads
the table again after ``TTL`` rather than waiting to be told. A change made here is seen at once.
"""

from __future__ import annotations

import time

from trainyard.spec.records import NodeCordon
from trainyard.store import Store
from trainyard.store.nodes import NodeCordonStore

TTL = 1.0  # seconds: how late the leader may learn of a cordon made through another server


class Cordons:
    def __init__(self, store: Store) -> None:
        self.rows = NodeCordonStore(store)
        self._read_at = float("-inf")
        self._now: dict[str, NodeCordon] = {}

    def current(self) -> dict[str, NodeCordon]:
        if time.monotonic() - self._read_at >= TTL:
            self._now = self.rows.all()  # replaced whole: a reader in another thread holds the old or the new
            self._read_at = time.monotonic()
        return self._now

    def changed(self) -> None:
        """Read again on the next ask: this server just changed a cordon."""
        self._read_at = float("-inf")
