"""Schedules: how late their fires are, and what a fired job costs the server against a submitted one.

    .venv/bin/python bench/schedule_fires.py [--schedules 50] [--seconds 10] [--repeats 2]

Starts its own trainyard server in a temporary TRAINYARD_HOME. Each repeat, in
alternating order (so drift hits both alike):

- submitted (the baseline): as many jobs as the schedules will fire (``true``,
  10 millicores), submitted by one SDK client spread over the same seconds, then
  waited for; the server's CPU per job.
- fired: ``--schedules`` schedules, each every second (a six-field cron, written
  to the database as one stored before the API refused them, on a server told by
  TRAINYARD_TEST_SECOND_CRONS to fire those, not hold them paused;
  concurrency ``allow``), for ``--seconds``; then all paused, and their jobs waited
  for. Per fire, its lateness (fired - due); the server's CPU per fired job
  (the loop's look, claim, record and the submit itself).

Prints each repeat, lateness p50 / p99 / max over all fires, the ratio of the
server's CPU per fired job to per submitted job, and PASS/MISS against our bar:
p99 lateness under 1 s, and a fired job at most 1.5 × a submitted one's CPU.
A fire skipped, missed or failed, or a job not succeeded, is a MISS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import psutil
from benchserver import BenchServer

from trainyard.envvars import TEST_SECOND_CRONS

JOB = {"command": ["true"], "resources": {"cpu": "10m"}}
LATE_P99 = 1.0  # seconds
CPU_RATIO = 1.5


def cpu(server: BenchServer) -> float:
    t = psutil.Process(server.proc.pid).cpu_times()
    return t.user + t.system


def submitted(server: BenchServer, n: int, seconds: float) -> float:
    """Server CPU seconds per job for ``n`` jobs submitted evenly over ``seconds``."""
    c = server.client
    before, t0, ids = cpu(server), time.monotonic(), []
    for i in range(n):
        time.sleep(max(0.0, t0 + i * seconds / n - time.monotonic()))
        ids.append(c.submit({"name": f"sub-{i}", **JOB}).id)
    for job_id in ids:
        info = c.wait(job_id, timeout=300)
        if info.status.value != "succeeded":
            raise RuntimeError(f"{job_id} {info.status.value}: {info.reason}")
    return (cpu(server) - before) / n


def every_second(server: BenchServer) -> Callable[[dict], str]:
    """What writes a paused schedule into the server's database as one made before six-field crons were refused
    (the API takes five fields: a minute is the finest), so a few seconds see many fires."""
    from trainyard.spec.schedule import ScheduleSpec
    from trainyard.spec.submitted import STORED
    from trainyard.store import Store
    from trainyard.store.schedules import ScheduleStore

    store = ScheduleStore(Store(f"sqlite:///{server.home / 'trainyard.db'}", run_migrations=False))
    return lambda spec: store.create(ScheduleSpec.model_validate(spec, context=STORED), None, "local", None, None)


def fired(server: BenchServer, schedules: int, seconds: float, tag: str) -> tuple[float, list[float]]:
    """(server CPU seconds per fired job, each fire's lateness) for ``schedules`` every-second schedules."""
    c = server.client
    before = cpu(server)
    write = every_second(server)
    for i in range(schedules):
        write({"name": f"{tag}-{i}", "cron": "* * * * * *", "concurrency": "allow", "suspend": True,
               "job": {"name": f"{tag}-{i}", **JOB}})
        c.schedules.resume(f"{tag}-{i}")  # which wakes the server's loop
    time.sleep(seconds)
    infos = []
    for i in range(schedules):
        c.schedules.pause(f"{tag}-{i}")
    for i in range(schedules):
        infos.append(c.schedules.get(f"{tag}-{i}"))
    runs = [r for s in infos for r in s.runs]
    bad = [r for r in runs if r.outcome != "started"]
    if bad:
        raise RuntimeError(f"{len(bad)} of {len(runs)} fires did not start a job: {bad[0]}")
    for r in runs:
        info = c.wait(r.job_id, timeout=300)
        if info.status.value != "succeeded":
            raise RuntimeError(f"{r.job_id} {info.status.value}: {info.reason}")
    for i in range(schedules):
        c.schedules.delete(f"{tag}-{i}")
    return (cpu(server) - before) / max(1, len(runs)), [r.fired_at - r.at for r in runs]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedules", type=int, default=50, help="schedules firing every second (default 50)")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long they fire (default 10)")
    ap.add_argument("--repeats", type=int, default=2, help="repeats per side (default 2)")
    args = ap.parse_args()
    if not (args.schedules >= 1 and 1 <= args.seconds <= 18 and args.repeats >= 1):
        ap.error("--schedules and --repeats at least 1, --seconds from 1 to 18 (a schedule's read shows its "
                 "latest 20 fires)")
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cpus; {args.schedules} schedules every second for "
          f"{args.seconds:g}s × {args.repeats}; load average {os.getloadavg()[0]:.2f}")
    tmp = Path(tempfile.mkdtemp(prefix="trainyard-bench-sched-"))
    os.environ[TEST_SECOND_CRONS] = "1"  # the server's: it fires the six-field crons written below
    server = BenchServer(tmp / "home")
    late: list[float] = []
    per_sub: list[float] = []
    per_fire: list[float] = []
    failed = None
    try:
        submitted(server, 10, 1.0)  # warm-up
        for i in range(args.repeats):
            order = ("fired", "submitted") if i % 2 else ("submitted", "fired")
            for side in order:
                if side == "submitted":
                    per_sub.append(submitted(server, int(args.schedules * args.seconds), args.seconds))
                    print(f"  repeat {i + 1}: submitted  {per_sub[-1] * 1000:6.2f} ms of server CPU a job")
                else:
                    c, lat = fired(server, args.schedules, args.seconds, f"r{i}")
                    per_fire.append(c)
                    late += lat
                    print(f"  repeat {i + 1}: fired      {c * 1000:6.2f} ms of server CPU a job, {len(lat)} fires, "
                          f"lateness p50 {pct(lat, .5) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms")
    except Exception as e:  # noqa: BLE001  (a failed repeat is a MISS, said)
        failed = str(e)
        print(f"  failed: {e}")
    finally:
        server.close()
    if not late or not per_sub:
        print("MISS  nothing measured")
        return 0
    ratio = statistics.median(per_fire) / statistics.median(per_sub)
    p99 = pct(late, .99)
    print(f"\nlateness of {len(late)} fires: p50 {pct(late, .5) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
          f"max {max(late) * 1000:.0f} ms")
    print(f"server CPU a job: fired {statistics.median(per_fire) * 1000:.2f} ms, submitted "
          f"{statistics.median(per_sub) * 1000:.2f} ms (median of {args.repeats})")
    ok = failed is None and len(per_fire) == len(per_sub) == args.repeats
    print(f"{'PASS' if ok and p99 < LATE_P99 else 'MISS'}  p99 lateness {p99:.3f}s (bar < {LATE_P99:g}s)")
    print(f"{'PASS' if ok and ratio <= CPU_RATIO else 'MISS'}  fired / submitted server CPU a job = {ratio:.2f}x "
          f"(bar ≤ {CPU_RATIO:g}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
