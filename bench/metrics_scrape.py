"""How long one ``/metrics`` scrape takes with 10,000 jobs in the store (target: under 100 ms).

    PYTHONPATH=src .venv/bin/python bench/metrics_scrape.py [--jobs 10000] [--archived 0] [--db URL] [--n 30]

Fills a fresh SQLite store (or ``--db``) with jobs in every status across 20 queues, one attempt per
admitted job (ended ones with a reason, a tenth preempted), and resource samples for the running
ones (as many as the 8 × 8-GPU cluster holds, ``--running``); then times the server's collector rendering the text exposition (``generate_latest``), against
a baseline measured in the same run: reading every job's queue and status into Python and counting
them there, the per-row way the collector avoids. Prints medians, the ratio, and PASS/MISS.

``--archived N`` also writes N deleted jobs' attempts as a delete does (``usage_archive`` rows, and their
sums in ``archive_counts``, which the scrape reads), and times, beside the scrape, grouping those N rows
as a scrape did before the sums (session 28): what the sums save.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from prometheus_client import generate_latest  # noqa: E402
from sqlalchemy import case, func, insert, select  # noqa: E402

from trainyard.scheduler.stats import CycleStats  # noqa: E402
from trainyard.services.metrics import TrainyardCollector, registry  # noqa: E402
from trainyard.spec import parse_job  # noqa: E402
from trainyard.spec.records import NodeInfo  # noqa: E402
from trainyard.store import Store, archive_counts  # noqa: E402
from trainyard.store import tables as t  # noqa: E402
from trainyard.store import usage_tables as ut  # noqa: E402

TARGET_MS = 100.0
STATUSES = ["pending"] * 30 + ["succeeded"] * 50 + ["failed"] * 15 + ["cancelled"] * 5
NODES, GPUS_PER_NODE = 8, 8


def fill(store: Store, n: int, running: int) -> int:
    """``running`` jobs run (one GPU each: the cluster bounds them, not the store); the rest wait or ended."""
    rnd = random.Random(1)
    spec = parse_job("command: python train.py\nresources: {cpu: 2, gpu: 1}").model_dump(mode="json")
    now = time.time()
    jobs, attempts, usage = [], [], []
    for i in range(n):
        status = "running" if i < running else rnd.choice(STATUSES)
        created = now - rnd.uniform(60, 30 * 86400)
        job_id = f"j-{i:08x}"
        jobs.append(dict(id=job_id, seq=i + 1, name=f"job{i % 50}", status=status, queue=f"q{i % 20}", priority=100,
                         spec=spec, snapshot=None, created_at=created, updated_at=created, not_before=None,
                         reason="needs 1 × GPU, 0 free on any node; 3 jobs ahead in queue q1" if status == "pending"
                         else None, position=None, status_by="scheduler"))
        if status == "pending":
            continue
        ended = None if status == "running" else created + rnd.uniform(60, 7200)
        reason = {"succeeded": "Succeeded", "failed": f"Error(exit {rnd.randint(1, 3)})",
                  "cancelled": "Cancelled", "running": None}[status]
        preempted = status != "running" and rnd.random() < 0.1
        wait = rnd.uniform(1, 600)
        attempts.append(dict(id=f"{job_id}-1", job_id=job_id, number=1, status=status, queue=f"q{i % 20}", wait=wait,
                             node=f"n{i % 8}", gpus=["0"], handle={}, created_at=created + wait,
                             started_at=created + 600, ended_at=ended, reason="Preempted" if preempted else reason,
                             preempted_by="j-other" if preempted else None, borrowed=False, last_contact_at=now))
        if status == "running":
            usage.append(dict(attempt_id=f"{job_id}-1", replica=0, job_id=job_id, samples=10, cpu_percent=180.0,
                              memory_bytes=8 << 30, peak_memory_bytes=9 << 30, gpu_util=rnd.uniform(0, 100),
                              gpu_memory_bytes=20 << 30, gpu_util_sum=500.0, gpu_samples=10, gpu_low_since=None,
                              idle_flagged_at=None, updated_at=now))
    with store.write() as s:
        conn = s.connection()
        conn.execute(insert(t.Job.__table__), jobs)
        conn.execute(insert(t.Attempt.__table__), attempts)
        if usage:
            conn.execute(insert(t.ReplicaUsage.__table__), usage)
    return len(usage)


def archive(store: Store, n: int) -> None:
    """``n`` deleted jobs' attempts, as :func:`trainyard.store.deletion.delete_in` archives them."""
    rnd = random.Random(2)
    rows = [dict(attempt_id=f"j-gone{i:08x}-1", job_id=f"j-gone{i:08x}", queue=f"q{i % 20}", queue_team=None,
                 team=None, owner="u", resources={"cpu": 2, "gpu": 1}, replicas=1, node=f"n{i % 8}",
                 status=(status := rnd.choice(STATUSES[30:])), reason={"succeeded": "Succeeded", "cancelled":
                 "Cancelled"}.get(status, f"Error(exit {rnd.randint(1, 3)})"), created_at=float(i),
                 ended_at=float(i + 600), preempted_by="j-other" if rnd.random() < 0.1 else None,
                 wait=rnd.uniform(1, 600)) for i in range(n)]
    for i in range(0, n, 500):  # a retention batch at a time
        with store.write() as s:
            s.connection().execute(insert(ut.UsageArchive.__table__), rows[i:i + 500])
            archive_counts.add(s.connection(), rows[i:i + 500])


def grouped_archive(store: Store) -> None:
    """What a scrape did before the sums: the two GROUP BYs over the whole archive."""
    a = ut.UsageArchive.__table__.c
    bucket = case(*[(a.wait <= b, i) for i, b in enumerate(archive_counts.WAIT_BOUNDS)], else_=99)
    with store.read() as s:
        conn = s.connection()
        conn.execute(select(a.queue, bucket, func.count(), func.sum(a.wait)).where(a.wait.is_not(None))
                     .group_by(a.queue, bucket)).all()
        conn.execute(select(a.queue, a.reason, a.status, a.preempted_by.is_not(None), func.count())
                     .group_by(a.queue, a.reason, a.status, a.preempted_by.is_not(None))).all()


def naive(store: Store) -> dict:
    """The baseline: every job's row read into Python and counted there."""
    with store.read() as s:
        return Counter((q, st) for q, st in s.execute(select(t.Job.queue, t.Job.status)))


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--running", type=int, default=NODES * GPUS_PER_NODE,
                    help="running jobs, each with its resource samples (default: one per GPU of the cluster)")
    ap.add_argument("--archived", type=int, default=0, help="deleted jobs' attempts in the archive")
    ap.add_argument("--db", default=None, help="database URL (default: a fresh SQLite file)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(args.db or f"sqlite:///{Path(tmp) / 'bench.db'}")
        running = fill(store, args.jobs, args.running)
        archive(store, args.archived)
        nodes = [NodeInfo(name=f"n{i}", cpu=64, memory=512 << 30, gpu=GPUS_PER_NODE, gpu_type="A100",
                          gpu_ids=[str(g) for g in range(GPUS_PER_NODE)]) for i in range(NODES)]
        stats = CycleStats()
        reg = registry(TrainyardCollector(store, lambda: nodes, stats))
        body = generate_latest(reg)  # warm-up, and the size
        scrape, base, old = [], [], []
        for _ in range(args.n):  # alternated, so drift hits both alike
            scrape += timed(lambda: generate_latest(reg), 1)
            base += timed(lambda: naive(store), 1)
            if args.archived:
                old += timed(lambda: grouped_archive(store), 1)
        store.close()
    sm, bm = statistics.median(scrape), statistics.median(base)
    print(f"store: {args.jobs} jobs ({running} running), {args.archived} deleted jobs' attempts archived, "
          f"scrape body {len(body)} bytes, {sum(1 for line in body.splitlines() if not line.startswith(b'#'))} samples")
    print(f"scrape (collector):        median {sm:7.1f} ms  p90 {sorted(scrape)[int(0.9 * len(scrape))]:7.1f} ms")
    print(f"baseline (per-row count):  median {bm:7.1f} ms")
    if old:
        print(f"the archive grouped (before its sums): median {statistics.median(old):7.1f} ms, which a scrape "
              f"would add")
    print(f"scrape / baseline: {sm / bm:.2f}×;  scrape / {TARGET_MS:.0f} ms target: {sm / TARGET_MS:.2f}  "
          f"{'PASS' if sm < TARGET_MS else 'MISS'}")


if __name__ == "__main__":
    main()
