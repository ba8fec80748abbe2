"""What the loop's last cycles looked like, for ``/metrics``: how long cycles take, and why jobs wait."""

from __future__ import annotations

from collections import Counter

from prometheus_client import Histogram

# Kueue's admission cycles take milliseconds to a second; ours run at least once a second
CYCLE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class CycleStats:
    def __init__(self) -> None:
        # not in any registry: the server's /metrics collector hands it out, so two servers in one
        # process (tests) keep their own
        self.cycles = Histogram("trainyard_scheduler_cycle_duration_seconds",
                                "Duration of one scheduler cycle (reconcile and admission)",
                                buckets=CYCLE_BUCKETS, registry=None)
        self.waiting: Counter[tuple[str, str]] = Counter()  # (queue, why: the plan's entry status) -> jobs

    def cycle(self, seconds: float) -> None:
        self.cycles.observe(seconds)

    def planned(self, entries: dict) -> None:
        """The plan's entries of jobs left pending: how many wait in each queue, by kind of reason."""
        self.waiting = Counter((e.queue.name, e.status.value) for e in entries.values() if not e.status.starting)
