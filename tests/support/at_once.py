"""Work started at the same moment in several threads (as several servers would), for races that a lock or a
compare-and-set must settle."""

from __future__ import annotations

import threading
from typing import Callable


def at_once(work: Callable[[int], None], n: int, timeout: float = 60) -> None:
    """``work(0)`` … ``work(n - 1)``, each in a thread of its own, let go together; joined before returning."""
    gate = threading.Barrier(n)

    def run(i: int) -> None:
        gate.wait()
        work(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
