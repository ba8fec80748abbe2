"""The server under cProfile, every thread: for finding where a benchmark's server CPU goes.

    bench/throughput.py --server-cmd "python bench/profiled_server.py OUT.prof"

cProfile profiles one thread; this gives each thread (the event loop, the
scheduler, the request pool) its own profiler, and merges them into OUT.prof
when the server exits (SIGTERM, as the benchmarks stop it). Times are each
thread's CPU time (``time.thread_time``), not the wall clock: on a shared
machine the wall clock mostly measures waiting for a core. Bench-only: the
product has no profiling switch. Read it with ``python -m pstats OUT.prof``.
"""

from __future__ import annotations

import atexit
import cProfile
import pstats
import signal
import sys
import threading
import time

out = sys.argv.pop(1)
profiles: list[cProfile.Profile] = []
# _bootstrap_inner, not run: anyio's worker threads (where sync endpoints run) override run()
_run = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]


def _profiled_run(self: threading.Thread) -> None:
    p = cProfile.Profile(time.thread_time)
    profiles.append(p)
    p.enable()
    try:
        _run(self)
    finally:
        p.disable()


def _dump() -> None:
    for p in profiles:
        p.disable()
    stats = pstats.Stats(profiles[0])
    for p in profiles[1:]:
        try:
            stats.add(p)
        except TypeError:  # a profiler that saw nothing
            pass
    stats.dump_stats(out)


threading.Thread._bootstrap_inner = _profiled_run  # type: ignore[attr-defined]
main = cProfile.Profile(time.thread_time)
profiles.append(main)
atexit.register(_dump)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
sys.argv = ["trainyard", "server"]
main.enable()
from trainyard.cli.main import app  # noqa: E402

try:
    app(prog_name="trainyard")
finally:
    main.disable()
