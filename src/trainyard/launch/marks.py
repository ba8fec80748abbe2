"""Where a launcher's time goes: named marks, kept only when ``TRAINYARD_LAUNCH_MARKS`` is set.

Each mark holds the wall clock (to line up with the attempt's file times and the
server's timestamps), a monotonic clock, and the CPU time of the calling thread
and of the whole launcher, so a profile read on a busy machine can tell waiting
for a core from work. The marks go to ``marks.json`` in the attempt dir when the
launcher is done (``bench/latency.py --marks`` prints them as a table). With the
variable unset, :func:`mark` is one global lookup and a return.
"""

from __future__ import annotations

import json
import os
import time

from trainyard import envvars

ENABLED = bool(os.environ.get(envvars.LAUNCH_MARKS))
FILE_NAME = "marks.json"
_marks: list[tuple[str, int, int, int, int]] = []


def mark(name: str) -> None:
    if ENABLED:  # list.append is atomic: the waiter and reporter threads mark too
        _marks.append((name, time.time_ns(), time.perf_counter_ns(), time.thread_time_ns(), time.process_time_ns()))


def reset() -> None:
    """Forget the parent's marks: a forked launcher starts its own list."""
    _marks.clear()


def dump(attempt_dir) -> None:  # noqa: ANN001
    if not ENABLED:
        return
    rows = [{"name": n, "wall_ns": w, "mono_ns": m, "thread_cpu_ns": t, "cpu_ns": c} for n, w, m, t, c in _marks]
    with open(os.path.join(attempt_dir, FILE_NAME), "w", encoding="utf-8") as f:
        json.dump(rows, f)
