"""What deleting ended jobs costs the database: `trainyard rm` and the `jobs` retention, against writing them.

    PYTHONPATH=src .venv/bin/python bench/deletion.py [--jobs 4000] [--db sqlite|URL]

Writes ``--jobs`` jobs through the store as the server does (submit, admit, one launcher report with 20 log
lines and 20 metric points that ends it), timing that; then deletes them all as the retention does, 500 at a
time (:meth:`trainyard.store.deletion.JobDeletion.delete`: the rows, their attempts archived), timing that and
each batch's transaction (how long the writer is held: what a scheduler cycle may wait for). Prints jobs/s
both ways, the ratio delete / write (the baseline measured in the same run), the batch's p50 and max, and the
database's size before and after (SQLite). It exits 0 whatever the numbers: it is a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from trainyard.auth.tokens import token_hash
from trainyard.services.attempts import _conclude
from trainyard.spec import parse_job
from trainyard.status import AttemptStatus, Reason
from trainyard.store import Store
from trainyard.store.deletion import JobDeletion

H = token_hash("bench")
DONE = {"status": AttemptStatus.SUCCEEDED, "exit_code": 0, "reason": Reason.SUCCEEDED, "message": None,
        "conclude": _conclude}
BATCH = 500


def write(store: Store, n: int) -> list[str]:
    spec = parse_job("name: bench\ncommand: python train.py\nresources: {cpu: 1, memory: 1Gi}\n")
    log = "".join(f"step {i} loss {1 / (i + 1):.4f}\n" for i in range(20))
    lines = [json.dumps({"step": i, "ts": time.time(), "values": {"loss": 1 / (i + 1)}}) for i in range(20)]
    ids = []
    for _ in range(n):
        job = store.create_job(spec)
        attempt = store.admit(job.id, [("node-1", [])], token_hash=H)
        store.report(attempt.id, 0, token_hash=H, running=True, log=(0, log), metrics=(0, lines), end=DONE)
        ids.append(job.id)
    return ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--db", default="sqlite", help="sqlite (a temporary file) or a database URL")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        url = f"sqlite:///{path}" if args.db == "sqlite" else args.db
        store = Store(url)
        t0 = time.perf_counter()
        ids = write(store, args.jobs)
        wrote = time.perf_counter() - t0
        size = path.stat().st_size if path.exists() else None
        rows, batches = JobDeletion(store), []
        t0 = time.perf_counter()
        for i in range(0, len(ids), BATCH):
            b = time.perf_counter()
            deleted = rows.delete(ids[i:i + BATCH])
            batches.append(time.perf_counter() - b)
            assert len(deleted) == len(ids[i:i + BATCH])
        took = time.perf_counter() - t0
        store.close()
        print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, database {url.split(':')[0]}")
        print(f"write  {args.jobs} jobs (submit, admit, report with 20 log lines and 20 points, end): "
              f"{wrote:6.2f} s  {args.jobs / wrote:8.0f} jobs/s")
        print(f"delete {args.jobs} jobs in batches of {BATCH} (rows, attempts archived):            "
              f"{took:6.2f} s  {args.jobs / took:8.0f} jobs/s")
        print(f"ratio delete / write: {took / wrote:.3f}")
        print(f"a batch holds the writer: p50 {statistics.median(batches) * 1000:.0f} ms, "
              f"max {max(batches) * 1000:.0f} ms ({len(batches)} batches)")
        if size is not None:
            print(f"database: {size / 1e6:.1f} MB after writing (SQLite keeps freed pages until VACUUM)")


if __name__ == "__main__":
    main()
