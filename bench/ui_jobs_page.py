"""The web UI's jobs page with 100,000 jobs in the store: server time and SQL queries per request.

    .venv/bin/python bench/ui_jobs_page.py [--jobs 100000] [--requests 60] [--db URL]

Fills a fresh store (SQLite in a temporary folder by default; ``--db postgresql://…`` for an empty
PostgreSQL database) with ``--jobs`` jobs by direct SQL inserts: eight queues of four teams, a dozen
owners, every status (most ended), an attempt with its replicas for every job that was admitted
(some retried), submitted over 30 days. The scheduler does not run: the numbers are the request's own.

Then times the request the jobs page makes (``GET /api/v1/jobs?…&count=true``) for typical filter
and sort combinations and label selectors (each job has one of 50 ``exp`` labels; 10 in all are
``stage=rare``), ``--requests`` times each, through the real app in this process (httpx's
ASGITransport: routing, auth, service, store and JSON, no socket), and the page's live count
(``GET /api/v1/jobs/counts``). The baseline, measured the same way in the same run, is reading one
job (``GET /api/v1/jobs/ID``). A commit before each request (not timed) keeps the server from
answering a page again from memory, as on a server whose jobs report all the time. Prints p50/p95
per combination, the ratio of its p95 to the baseline's, the SQL queries per request (counted on
the store's engine), and PASS/MISS: every p95 < 300 ms and at most 3 queries per request. Exits 0
whatever the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import secrets
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from sqlalchemy import event, insert, text

from trainyard.api.app import create_app
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.services.platform import Platform
from trainyard.spec.job import JobSpec
from trainyard.spec.records import NodeInfo
from trainyard.store import tables as t

TARGET_P95 = 0.300
MAX_QUERIES = 3
TOKEN = "bench-token"
MODELS = ["resnet50", "bert-base", "gpt2-small", "vit-b16", "llama-ft", "whisper", "unet", "xgb-sweep"]
QUEUES = [("vision", "cv"), ("vision-big", "cv"), ("nlp", "text"), ("nlp-long", "text"), ("speech", "audio"),
          ("tabular", "ds"), ("default", "ds"), ("research", "audio")]
OWNERS = ["ann", "bob", "chen", "dara", "eli", "fay", "gus", "hana", "ivan", "jo", "kim", "lee"]
# status, share of jobs, its reason
STATUSES = [("succeeded", 0.60, "succeeded"), ("failed", 0.14, "Error(exit 1): exit code 1"),
            ("cancelled", 0.06, "cancelled"), ("running", 0.08, None), ("pending", 0.10, "waiting for 2 × A100"),
            ("starting", 0.01, None), ("cancelling", 0.01, "cancel requested")]
RESOURCES = [{"cpu": 4, "memory": "16Gi", "gpu": 2, "gpu_type": "A100"}, {"cpu": 2, "memory": "8Gi"},
             {"cpu": 8, "memory": "64Gi", "gpu": 8, "gpu_type": "H100"}, {"cpu": 1}]
NODES = [NodeInfo(name=f"n{i}", cpu=64, memory=512 * 2**30, gpu=8, gpu_type="A100",
                  gpu_ids=[str(g) for g in range(8)]) for i in range(4)]
DAY = 86400.0


def fill(engine, n: int, now: float) -> str:  # noqa: ANN001
    """``n`` jobs with attempts and replicas, inserted in batches; a running job's id (the baseline reads
    it: a job that can still change is read from the database, not from memory)."""
    rng = random.Random(7)
    salt = secrets.randbits(40)
    specs = {(q, r): JobSpec.model_validate({"name": "x", "queue": q, "command": "python train.py --lr {{params.lr}}",
                                             "params": {"lr": 0.01}, "resources": RESOURCES[r]}).model_dump(mode="json")
             for q, _ in QUEUES for r in range(len(RESOURCES))}
    weights = [s[1] for s in STATUSES]
    jobs, attempts, replicas, labelled = [], [], [], []
    running = None
    for i in range(n):
        q, team = QUEUES[rng.randrange(len(QUEUES))]
        r = rng.randrange(len(RESOURCES))
        status, _, reason = rng.choices(STATUSES, weights)[0]
        created = now - 30 * DAY * (1 - i / n)  # submit order is time order
        job_id = f"j-{(i * 0x9E3779B1 + salt) % 2**40:010x}"  # unique (an odd multiplier is a bijection), random-looking
        # labels: an experiment of 50 (2 % of jobs each), and 10 jobs in all tagged stage=rare
        labels = {"exp": f"e{i % 50}", **({"stage": "rare"} if i % (n // 10 or 1) == 3 else {})}
        spec = dict(specs[(q, r)], name=f"{MODELS[i % len(MODELS)]}-{rng.randrange(1000)}", labels=labels)
        jobs.append(dict(id=job_id, seq=i + 1, name=spec["name"], status=status, queue=q, priority=0, spec=spec,
                         snapshot=None, created_at=created, updated_at=created + 600, not_before=None, reason=reason,
                         position=None, owner=OWNERS[rng.randrange(len(OWNERS))], team=team, status_by="bench"))
        labelled += [dict(job_id=job_id, key=k, value=v) for k, v in labels.items()]  # as Store.create_job writes
        running = running or (job_id if status == "running" else None)
        tries = 0 if status == "pending" else (2 if rng.random() < 0.1 else 1)
        for number in range(1, tries + 1):
            ended = status in ("succeeded", "failed", "cancelled") or number < tries
            start = created + 5 + (number - 1) * 700
            att = f"{job_id}-{number}"
            gpus = [str(g) for g in range(RESOURCES[r].get("gpu", 0))]
            attempts.append(dict(id=att, job_id=job_id, number=number, status="succeeded" if ended else "running",
                                 node="n1", gpus=gpus, handle={}, exit_code=0 if ended else None,
                                 reason="Succeeded" if ended else None, message=None, created_at=start,
                                 started_at=start + 1, ended_at=start + 600 if ended else None,
                                 last_contact_at=start + 600, queue=q))
            for index in range(2 if r == 2 else 1):
                replicas.append(dict(attempt_id=att, index=index, node=f"n{index}", gpus=gpus,
                                     status=attempts[-1]["status"], started_at=start + 1, log_size=0,
                                     metrics_offset=0))
        if len(jobs) >= 5000 or i == n - 1:
            with engine.begin() as conn:
                conn.execute(insert(t.Job.__table__), jobs)
                conn.execute(insert(t.JobLabel.__table__), labelled)
                if attempts:
                    conn.execute(insert(t.Attempt.__table__), attempts)
                    conn.execute(insert(t.Replica.__table__), replicas)
            jobs, attempts, replicas, labelled = [], [], [], []
    return running


def combos(now: float) -> list[tuple[str, str]]:
    week = int(now - 7 * DAY)
    return [
        ("default page (newest 50)", "limit=50&count=true"),
        ("running + pending", "status=running&status=pending&limit=50&count=true"),
        ("queue, sorted by name", "queue=nlp&sort=name&limit=50&count=true"),
        ("search 'resnet'", "q=resnet&limit=50&count=true"),
        ("team + owner, last 7 days", f"team=cv&owner=ann&since={week}&limit=50&count=true"),
        ("failed, by -name, page 5", "status=failed&sort=-name&offset=200&limit=50&count=true"),
        ("sorted by status, page 20", "sort=status&offset=950&limit=50&count=true"),
        ("200 per page, by queue", "sort=queue&limit=200&count=true"),
        ("date range, oldest first", f"since={int(now - 20 * DAY)}&until={int(now - 10 * DAY)}&sort=created&count=true"),
        ("label exp=e7 (2 % of jobs)", "label=exp%3De7&limit=50&count=true"),
        ("label stage=rare (10 jobs)", "label=stage%3Drare&limit=50&count=true"),
        ("exp in (e1,e2),stage!=rare", "label=exp+in+%28e1%2Ce2%29%2Cstage%21%3Drare&limit=50&count=true"),
    ]


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="trainyard-bench-ui-"))
    db = args.db or f"sqlite:///{tmp / 'trainyard.db'}"
    platform = Platform(ServerSettings(home=tmp / "home", db=db, token=TOKEN), engine=FakeEngine(NODES))
    try:
        now = time.time()
        t0 = time.perf_counter()
        one = fill(platform.store.engine, args.jobs, now)
        print(f"filled {args.jobs:,} jobs in {time.perf_counter() - t0:.1f} s ({db.split(':')[0]})")
        executed: list[str] = []
        event.listen(platform.store.engine, "before_cursor_execute",
                     lambda c, cur, stmt, *a: executed.append(stmt) if not stmt.startswith(("BEGIN", "UPDATE"))
                     else None)
        app = create_app(platform, "http://bench")  # no lifespan: the scheduler stays off
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench",
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            def write() -> None:
                """A commit, as a busy server's reports make all the time: a page read before it is not
                answered again from memory (SQLite's data_version moves), so each request runs its queries."""
                with platform.store.engine.begin() as conn:
                    conn.execute(text("UPDATE jobs SET updated_at = updated_at + 1 WHERE seq = 1"))

            async def measure(url: str) -> tuple[list[float], int]:
                await http.get(url)  # warm: the first request pays for imports and connections
                times, most = [], 0
                for _ in range(args.requests):
                    write()
                    executed.clear()
                    t1 = time.perf_counter()
                    r = await http.get(url)
                    times.append(time.perf_counter() - t1)
                    r.raise_for_status()
                    most = max(most, len(executed))
                return times, most

            base, _ = await measure(f"/api/v1/jobs/{one}")
            base95 = pct(base, 0.95)
            print(f"baseline: one job (GET /api/v1/jobs/ID)  p50 {statistics.median(base) * 1000:6.1f} ms"
                  f"  p95 {base95 * 1000:6.1f} ms\n")
            print(f"{'request':38} {'p50':>9} {'p95':>9} {'p95/base':>9} {'queries':>8}  rows of")
            ok = True
            for label, query in [*combos(now), ("live count (/jobs/counts)", None)]:
                url = f"/api/v1/jobs?{query}" if query else "/api/v1/jobs/counts"
                times, queries = await measure(url)
                body = (await http.get(url)).json()
                shown = f"{len(body['items'])} of {body['total']}{'+' if body['total_capped'] else ''}" if query \
                    else f"{body['running']} running"
                p95 = pct(times, 0.95)
                ok &= p95 < TARGET_P95 and queries <= MAX_QUERIES
                print(f"{label:38} {statistics.median(times) * 1000:6.1f} ms {p95 * 1000:6.1f} ms "
                      f"{p95 / base95:8.1f}x {queries:8d}  {shown}")
        print(f"\ntarget: p95 < {TARGET_P95 * 1000:.0f} ms and ≤ {MAX_QUERIES} queries per request, "
              f"{args.requests} requests each: {'PASS' if ok else 'MISS'}")
    finally:
        platform.store.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--requests", type=int, default=60, help="timed requests per combination (p95 over these)")
    p.add_argument("--db", help="an empty database URL (default: SQLite in a temporary folder)")
    asyncio.run(main(p.parse_args()))
