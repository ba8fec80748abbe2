"""What asking SQLite's data_version adds to a kept jobs page (services/job_pages.py).

    PYTHONPATH=src:bench .venv/bin/python bench/page_version.py [--jobs 100] [--rounds 6] [--calls 3000]

The API answers a listing nobody wrote since from its PageCache, keyed by
``Store.version``. That number was a count of this process's commits; it is now
``PRAGMA data_version`` on a connection of its own (trainyard.store.db.DataVersion),
so commits by other processes count too. This times, in one process and one run,
``JobsService.page_json()`` of a kept page (the cache hit: no SQL, no JSON) with
each version source, alternating in rounds: **after** (data_version, as shipped)
and **baseline** (a plain counter, as before). Also the version call alone.
Prints microseconds per call and the ratio after / baseline. No HTTP: the hit
path is where the added call weighs the most.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from pathlib import Path

from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.services.platform import Platform
from trainyard.spec import parse_job
from trainyard.spec.records import NodeInfo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="trainyard-bench-")) / "home"
    platform = Platform(ServerSettings(home=home, token="t"),
                        engine=FakeEngine([NodeInfo(name="a", cpu=4, memory=2**34)]))
    store = platform.store
    for i in range(args.jobs):
        store.create_job(parse_job(f"name: j{i}\ncommand: x"))
    shipped = store._changes  # noqa: SLF001 (the bench swaps the version source, nothing else)
    counter = itertools.repeat(7).__next__  # what the old count cost: a read of a number

    async def hits(n: int) -> float:
        await platform.jobs.page_json()  # kept from here on (nothing is written)
        began = time.perf_counter()
        for _ in range(n):
            await platform.jobs.page_json()
        return (time.perf_counter() - began) / n * 1e6

    sides: dict[str, list[float]] = {"after": [], "baseline": []}
    for r in range(args.rounds):
        for side in (("after", "baseline") if r % 2 == 0 else ("baseline", "after")):
            store._changes = shipped if side == "after" else counter  # noqa: SLF001
            sides[side].append(asyncio.run(hits(args.calls)))
    store._changes = shipped  # noqa: SLF001
    began = time.perf_counter()
    for _ in range(args.calls * 10):
        store.version  # noqa: B018
    alone = (time.perf_counter() - began) / (args.calls * 10) * 1e6
    after, base = statistics.median(sides["after"]), statistics.median(sides["baseline"])
    print(f"kept page, us per call (median of {args.rounds} rounds of {args.calls}): "
          f"after {after:.2f} (rounds {', '.join(f'{v:.2f}' for v in sides['after'])}), "
          f"baseline {base:.2f} (rounds {', '.join(f'{v:.2f}' for v in sides['baseline'])})")
    print(f"Store.version alone (data_version): {alone:.2f} us")
    print(f"ratio after / baseline: {after / base:.2f}")
    store.close()


if __name__ == "__main__":
    main()
