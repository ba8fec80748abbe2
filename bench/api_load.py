"""The API under load: what one client sees reading a job while 100 others list jobs and read it.

    .venv/bin/python bench/api_load.py [--clients 100] [--duration 30] [--interval 1.0] [--profile FILE]

Starts its own trainyard server in a temporary TRAINYARD_HOME and fills it with
``--jobs`` finished jobs. Then two client processes, so that neither measures
the other's CPU use as the server's latency:

- the **load**: ``--clients`` concurrent clients in one asyncio process (one
  aiohttp session, a connection each). Each lists jobs (``GET
  /api/v1/jobs``, the first page of 50) and reads the one job (``GET
  /api/v1/jobs/{id}``), then waits for its next ``--interval`` tick (a
  dashboard refreshing; ``--interval 0`` runs flat out, where the latency is
  set by Little's law: clients / the server's rate, not by the server's design).
- the **probe**: one client alone in its own process, reading the job over one
  keep-alive connection: ``--single`` reads back to back before the load and
  again after it (the single-client latency), and one read every 50 ms while
  the load runs (the latency under load).

The target (issue 20, target 5): 0 errors, and the probe's p99 under load ≤ 10 ×
its single-client median, both measured in this run. Also printed: the load
clients' own percentiles (not gated: they include their own process's queue
for a core) and the CPU each process used. ``--profile FILE`` records the
server with py-spy during the load (collapsed stacks, GIL holders only) and
prints where its time went. Exits 0 whatever the numbers (2 on bad usage).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import math
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
from benchserver import BenchServer

TARGET_P99_RATIO = 10.0
START_DELAY = 5.0  # seconds from starting the client processes to the start of the load
PROBE_EVERY = 0.05


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def ms(x: float) -> str:
    return f"{x * 1000:7.1f} ms"


async def _client(http, job_id: str, until: float, interval: float, offset: float, out: dict) -> None:  # noqa: ANN001
    import aiohttp

    next_at = time.monotonic() + offset
    while True:
        if interval:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += interval
        if time.monotonic() >= until:
            return
        for kind, path in (("list", "/api/v1/jobs"), ("get", f"/api/v1/jobs/{job_id}")):
            t0 = time.perf_counter()
            try:
                async with http.get(path) as r:
                    await r.read()
                    ok, why = r.status < 300, f"HTTP {r.status}"
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                ok, why = False, repr(e)
            if ok:
                out[kind].append(time.perf_counter() - t0)
            else:
                out["errors"].append(f"{kind}: {why}")


def load_proc(url: str, headers: dict, job_id: str, clients: int, start_at: float, duration: float,
              interval: float, queue: mp.Queue) -> None:
    out: dict = {"list": [], "get": [], "errors": [], "cpu": 0.0}

    async def main() -> None:
        import aiohttp

        # aiohttp, not httpx: its parser is in C, so the load's process takes less of the cores the server
        # and the probe need (httpx's async client cost more CPU than the server); a connection per client
        async with aiohttp.ClientSession(base_url=url, headers=headers, timeout=aiohttp.ClientTimeout(total=60),
                                         connector=aiohttp.TCPConnector(limit=clients)) as http:
            await asyncio.sleep(max(0.0, start_at - time.time()))  # wall clock: shared with the probe
            until, cpu0 = time.monotonic() + duration, time.process_time()
            # offsets spread the clients' rounds over one interval
            await asyncio.gather(*(_client(http, job_id, until, interval, interval * i / clients, out)
                                   for i in range(clients)))
            out["cpu"] = time.process_time() - cpu0

    asyncio.run(main())
    queue.put(("load", out))


def _reads(http: httpx.Client, path: str, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        http.get(path).raise_for_status()
        times.append(time.perf_counter() - t0)
    return times


def probe_proc(url: str, headers: dict, job_id: str, single: int, duration: float, ready, go, start,  # noqa: ANN001
               queue: mp.Queue) -> None:
    out: dict = {"single": [], "under_load": [], "errors": [], "cpu": 0.0}
    path = f"/api/v1/jobs/{job_id}"
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            _reads(http, path, 20)  # warm-up
            out["single"] = _reads(http, path, single)
            ready.set()
            go.wait()
            time.sleep(max(0.0, start.value - time.time()))
            end, cpu0 = time.monotonic() + duration, time.process_time()
            while time.monotonic() < end:
                t0 = time.perf_counter()
                try:
                    http.get(path).raise_for_status()
                    out["under_load"].append(time.perf_counter() - t0)
                except httpx.HTTPError as e:
                    out["errors"].append(f"probe: {e!r}")
                time.sleep(PROBE_EVERY)
            out["cpu"] = time.process_time() - cpu0
            time.sleep(1.0)  # the load's last answers drain
            out["single"] += _reads(http, path, single)  # after too: drift hits both
    except httpx.HTTPError as e:
        out["errors"].append(f"probe: {e!r}")
    queue.put(("probe", out))


def run(url: str, headers: dict, job_id: str, args: argparse.Namespace, server_pid: int) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    ready, go, start = ctx.Event(), ctx.Event(), ctx.Value("d", 0.0)
    probe = ctx.Process(target=probe_proc, args=(url, headers, job_id, args.single, args.duration, ready, go, start,
                                                 queue))
    probe.start()
    if not ready.wait(300):  # its single-client reads come first, alone
        raise RuntimeError("the probe did not finish its single-client reads in 300 s")
    start.value = start_at = time.time() + START_DELAY  # time for the load process to import httpx
    go.set()
    procs = [probe, ctx.Process(target=load_proc, args=(url, headers, job_id, args.clients, start_at,
                                                        args.duration, args.interval, queue))]
    procs[1].start()
    server = psutil.Process(server_pid)
    time.sleep(max(0.0, start_at - time.time()))
    cpu0, t0 = sum(server.cpu_times()[:2]), time.perf_counter()
    spy = None
    if args.profile:
        beside = Path(sys.executable).with_name("py-spy")  # installed with the dev extra
        spy = subprocess.Popen([str(beside) if beside.exists() else "py-spy", "record", "-p", str(server_pid), "-d", str(int(args.duration)),
                                "-r", "200", "--gil", "-f", "raw", "-o", args.profile],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(args.duration)
    got: dict = {"server_cpu": (sum(server.cpu_times()[:2]) - cpu0) / (time.perf_counter() - t0)}
    for _ in procs:
        kind, part = queue.get(timeout=args.duration + 300)
        got[kind] = part
    for p in procs:
        p.join()
    if spy is not None:
        spy.wait(60)
    return got


def top_frames(path: str, n: int = 12) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """From py-spy's collapsed stacks: the share of samples per function where it ran itself (the leaf),
    and where it was on the stack (less the frames every sample passes through, the server's start)."""
    own: collections.Counter = collections.Counter()
    under: collections.Counter = collections.Counter()
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f.split(" (")[0] + " (" + f.rsplit(" (", 1)[-1].split(":")[0] + ")" for f in stack.split(";")]
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            under[frame] += int(count)
    if not total:
        return [], []
    inner = [(f, c / total) for f, c in under.most_common() if c / total < 0.8][:n]
    return [(f, c / total) for f, c in own.most_common(n)], inner


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of load (default 30)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between one client's rounds; 0: flat out")
    ap.add_argument("--jobs", type=int, default=100, help="finished jobs in the store first (default 100)")
    ap.add_argument("--single", type=int, default=300, help="single-client reads before and after (default 300)")
    ap.add_argument("--profile", help="record the server with py-spy during the load into this file")
    ap.add_argument("--server-cmd", default=f"{sys.executable} -m trainyard server",
                    help="how to start the server (split on spaces; default: %(default)s)")
    args = ap.parse_args()
    if min(args.clients, args.single) < 1 or args.duration <= 0 or args.interval < 0 or args.jobs < 1:
        ap.error("--clients, --single, --jobs must be at least 1, --duration positive, --interval ≥ 0")

    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cpus; {args.clients} clients for "
          f"{args.duration:g} s, one round each {args.interval:g} s; load average {os.getloadavg()[0]:.2f}")
    tmp = Path(tempfile.mkdtemp(prefix="trainyard-bench-api-"))
    server, got, stopped = None, {}, None
    try:
        server = BenchServer(tmp / "home", args.server_cmd.split())
        ids = [server.client.submit({"name": f"load-{i}", "command": ["true"], "resources": {"cpu": "10m"}}).id
               for i in range(args.jobs)]
        for job_id in ids:
            server.client.wait(job_id, timeout=300)
        headers = {"Authorization": f"Bearer {(server.home / 'token').read_text().strip()}"}
        got = run(server.url, headers, ids[len(ids) // 2], args, server.proc.pid)
    except Exception as e:
        stopped = str(e)
        print(f"stopped: {e}")
    finally:
        if server is not None:
            server.close()
        shutil.rmtree(tmp, ignore_errors=True)

    load, probe = got.get("load", {}), got.get("probe", {})
    base, under = probe.get("single", []), probe.get("under_load", [])
    if base:
        print(f"\nprobe alone, read one job:      n={len(base):<5} median {ms(statistics.median(base))}  "
              f"p90 {ms(pct(base, 0.9))}  p99 {ms(pct(base, 0.99))}")
    if under:
        print(f"probe under load, read one job: n={len(under):<5} p50    {ms(pct(under, 0.5))}  "
              f"p90 {ms(pct(under, 0.9))}  p99 {ms(pct(under, 0.99))}  max {ms(max(under))}")
    for kind in ("list", "get"):
        xs = load.get(kind)
        if xs:
            print(f"load clients, {kind:4s}: n={len(xs):<6} p50 {ms(pct(xs, 0.5))}  p90 {ms(pct(xs, 0.9))}  "
                  f"p99 {ms(pct(xs, 0.99))}  max {ms(max(xs))}")
    errors = load.get("errors", []) + probe.get("errors", [])
    if load:
        offered = f"{2 * args.clients / args.interval:.0f}/s" if args.interval else "flat out"
        print(f"  {(len(load['list']) + len(load['get'])) / args.duration:.0f} requests/s answered (offered "
              f"{offered}); {len(errors)} errors {errors[:3]}")
        print(f"  CPU, share of one core during the load: server {got['server_cpu']:.0%}, load clients "
              f"{load['cpu'] / args.duration:.0%}, probe {probe.get('cpu', 0) / args.duration:.0%} "
              f"(on {os.cpu_count()} cores)")
    if args.profile and Path(args.profile).exists():
        own, inner = top_frames(args.profile)
        print(f"\nserver profile ({args.profile}, samples holding the GIL): running itself")
        for frame, share in own:
            print(f"  {share:6.1%}  {frame}")
        print("on the stack")
        for frame, share in inner:
            print(f"  {share:6.1%}  {frame}")
    print(f"\ntargets (load average now {os.getloadavg()[0]:.2f}):")
    measured = stopped is None and bool(base) and bool(under) and bool(load.get("get"))
    print(f"  {'PASS' if measured and not errors else 'MISS'}  errors under load = "
          f"{len(errors) if measured else 'not measured'}  (target 0)")
    if measured:
        ratio = pct(under, 0.99) / statistics.median(base)
        print(f"  {'PASS' if ratio <= TARGET_P99_RATIO else 'MISS'}  probe's p99 read under load / its "
              f"single-client median = {ratio:.1f}x  (target ≤ {TARGET_P99_RATIO:g}x)")
    else:
        print("  MISS  p99 under load: not measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
