"""What the Ray engine keeps in memory of the replicas this process launched or attached to: the run
calls it follows, what ended ones answered, and when a cancel was asked.

Launch and the watcher thread write it; reconcile (:mod:`trainyard.engines.ray.reconcile`) reads it
and forgets what ended attempts left. It is one object both hold, so neither reaches into the
other. ``lock`` guards the run calls and their answers together: a replica is never seen between
the two (its run call taken off, its answer not yet noted), which reconcile would read as gone.
The cancel tables are written and read by the caller's thread only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from trainyard.spec.reports import LaunchResult

Key = tuple[str, int]  # (attempt id, replica)


@dataclass(slots=True)
class ReplicaLedger:
    lock: threading.Lock = field(default_factory=threading.Lock)
    runs: dict[Any, Key] = field(default_factory=dict)          # ObjectRef of a replica's run call -> replica
    gangs: dict[str, set[int]] = field(default_factory=dict)    # attempt -> replicas whose run call is in flight
    results: dict[Key, LaunchResult] = field(default_factory=dict)
    unstarted: set[Key] = field(default_factory=set)            # replicas whose actor never started a launcher
    lost: set[Key] = field(default_factory=set)                 # replicas an agent started and no longer knows
    cancelled: dict[str, float] = field(default_factory=dict)   # attempt -> when cancel was asked
    grace: dict[str, float] = field(default_factory=dict)       # attempt -> its spec's grace period

    def forget(self, active: set[str]) -> set[str]:
        """Drop what attempts not in ``active`` left; the attempts whose run calls are still in flight."""
        with self.lock:
            for key in [k for k in self.results if k[0] not in active]:
                del self.results[key]
            self.unstarted = {k for k in self.unstarted if k[0] in active}
            self.lost = {k for k in self.lost if k[0] in active}
            for table in (self.cancelled, self.grace):
                for aid in [a for a in table if a not in active]:
                    del table[aid]
            return set(self.gangs)
