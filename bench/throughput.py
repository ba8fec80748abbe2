"""Throughput: a burst of trivial jobs from several client threads, end to end, against a bare subprocess loop.

    .venv/bin/python bench/throughput.py [--jobs 1000] [--threads 4] [--repeats 3] [--marks]

Starts its own trainyard server in a temporary TRAINYARD_HOME. Each repeat
runs, in alternating order (so drift hits both alike):

- trainyard: ``--threads`` client threads, each with its own SDK client,
  submit ``--jobs`` jobs between them (``true``, 10 millicores, so the local
  node never runs out of room), then wait for each of their jobs; timed from
  the first submit to the last job seen ended. Every job must succeed.
- the physical floor: the same ``--jobs`` commands started one after another
  by ``subprocess.run`` in this process.

Prints every repeat, the median and spread of jobs/s end to end and submit
alone, the server process's own CPU seconds per 1,000 jobs (user + system,
from psutil; on a shared machine this moves far less than the wall clock),
the launchers' (with their commands; reaped by the local engine's zygote) and the
client threads' (this process's own during the burst), the
CPU-bound ceiling those two imply on this many idle cores and the server's own on one core (its
Python holds the GIL), the ratio trainyard time / floor time, and PASS/MISS against the
target (≥ 150 jobs/s end to end). A repeat that fails (a job not succeeded, an
error) counts as a MISS: the verdict is PASS only if every repeat was measured
and the median meets the target. It exits 0 whatever the numbers (2 on bad usage).
With ``--marks`` the launchers write their marks (``TRAINYARD_LAUNCH_MARKS``) and the
median wall and CPU of each launcher step over the whole run is printed, as
``latency.py --marks`` does for one job at a time: in a burst, which steps cost.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import fsstate
import launcher_marks
import psutil
from benchserver import BenchServer

from trainyard import Client

COMMAND = ["true"]
SPEC = {"name": "burst", "command": COMMAND, "resources": {"cpu": "10m"}}
TARGET_JOBS_PER_S = 150.0


def floor(n: int) -> float:
    """Seconds to start and reap ``n`` commands one after another, nothing else."""
    t0 = time.perf_counter()
    for _ in range(n):
        subprocess.run(COMMAND, check=True)
    return time.perf_counter() - t0


def server_cpu(server: BenchServer) -> float:
    """CPU seconds the server process itself has used (not its launchers, which are other processes)."""
    t = psutil.Process(server.proc.pid).cpu_times()
    return t.user + t.system


def launcher_cpu(server: BenchServer) -> float:
    """CPU seconds of the launchers (with the commands they ran): the local engine's zygote forks
    them and reaps them, so those that ended add up in its children's times; those it keeps for
    the next attempts (trainyard.launch.handoff) are read one by one."""
    total = 0.0
    for p in psutil.Process(server.proc.pid).children():
        try:
            if "trainyard.launch.zygote" in p.cmdline():
                t = p.cpu_times()
                total += t.children_user + t.children_system
                for kept in p.children():
                    t = kept.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def burst(server: BenchServer, n: int, threads: int) -> tuple[float, float]:
    """(seconds to submit all, seconds until all ended) for ``n`` jobs from ``threads`` clients."""
    token = (server.home / "token").read_text().strip()
    clients = [Client(server.url, token=token) for _ in range(threads)]
    shares = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]
    ids: list[list[str]] = [[] for _ in range(threads)]
    failures: list[str] = []
    submitted = threading.Barrier(threads + 1)
    start = threading.Barrier(threads + 1)

    def client_thread(i: int) -> None:
        c = clients[i]
        start.wait()
        try:
            for _ in range(shares[i]):
                ids[i].append(c.submit(SPEC).id)
        finally:
            submitted.wait()
        for job_id in ids[i]:
            info = c.wait(job_id, timeout=300)
            if info.status.value != "succeeded":
                failures.append(f"{job_id} {info.status.value}: {info.reason}")

    workers = [threading.Thread(target=client_thread, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    t0 = time.perf_counter()
    submitted.wait()
    t_submit = time.perf_counter() - t0
    for w in workers:
        w.join()
    t_all = time.perf_counter() - t0
    for c in clients:
        c.close()
    done = sum(len(x) for x in ids)
    if done != n or failures:
        raise RuntimeError(f"{done}/{n} submitted, {len(failures)} not succeeded: {failures[:3]}")
    return t_submit, t_all


def spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):7.1f}  (min {min(xs):.1f}, max {max(xs):.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1000, help="jobs per burst (default 1000)")
    ap.add_argument("--threads", type=int, default=4, help="client threads (default 4)")
    ap.add_argument("--repeats", type=int, default=3, help="bursts per side (default 3)")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured jobs first (default 20)")
    ap.add_argument("--server-cmd", default=f"{sys.executable} -m trainyard server",
                    help="how to start the server (split on spaces; default: %(default)s)")
    ap.add_argument("--marks", action="store_true",
                    help="launchers write marks.json (TRAINYARD_LAUNCH_MARKS): print their steps' wall and CPU")
    args = ap.parse_args()
    if args.jobs < 1 or args.threads < 1 or args.repeats < 1 or args.warmup < 0:
        ap.error("--jobs, --threads and --repeats must be at least 1, --warmup at least 0")

    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cpus; {args.jobs} jobs × {args.repeats} repeats "
          f"from {args.threads} threads; load average {os.getloadavg()[0]:.2f}")
    if args.marks:
        os.environ["TRAINYARD_LAUNCH_MARKS"] = "1"  # trainyard.envvars.LAUNCH_MARKS, inherited by the server
    tmp = Path(tempfile.mkdtemp(prefix="trainyard-bench-tp-"))
    print(fsstate.describe(tmp))
    fsstate.settle(tmp)
    floors: list[float] = []
    ends: list[float] = []
    submits: list[float] = []
    cpus: list[float] = []
    launchers: list[float] = []
    clients: list[float] = []
    errors: list[str] = []
    server = None
    try:
        server = BenchServer(tmp / "home", args.server_cmd.split())
        if args.warmup:
            burst(server, args.warmup, min(args.threads, args.warmup))
        for i in range(args.repeats):
            for side in (("floor", "trainyard") if i % 2 == 0 else ("trainyard", "floor")):
                if side == "floor":
                    floors.append(floor(args.jobs))
                    print(f"  repeat {i + 1}: floor      {args.jobs / floors[-1]:7.1f} jobs/s ({floors[-1]:.2f} s)")
                    continue
                try:
                    c0, l0, own0 = server_cpu(server), launcher_cpu(server), time.process_time()
                    t_submit, t_all = burst(server, args.jobs, args.threads)
                    clients.append((time.process_time() - own0) * 1000 / args.jobs)  # the SDK threads' own
                    time.sleep(0.5)  # the last launchers exit just after their last report: let the zygote reap them
                    cpus.append((server_cpu(server) - c0) * 1000 / args.jobs)
                    launchers.append((launcher_cpu(server) - l0) * 1000 / args.jobs)
                except Exception as e:  # recorded, and the verdict becomes a MISS
                    errors.append(f"repeat {i + 1}: {e}")
                    print(f"  repeat {i + 1}: trainyard  FAILED: {e}")
                    continue
                submits.append(args.jobs / t_submit)
                ends.append(args.jobs / t_all)
                print(f"  repeat {i + 1}: trainyard  {ends[-1]:7.1f} jobs/s end to end ({t_all:.2f} s), "
                      f"submit alone {submits[-1]:.1f} jobs/s ({t_submit:.2f} s), "
                      f"server CPU {cpus[-1]:.1f} s per 1,000 jobs, launchers' CPU {launchers[-1]:.1f} s, "
                      f"clients' CPU {clients[-1]:.1f} s")
    except Exception as e:
        errors.append(str(e))
        print(f"stopped: {e}")
    finally:
        if server is not None:
            server.close()
        if args.marks:  # every launcher's, warm-up included
            runs = [launcher_marks.load(m.parent, wait=0) for m in (tmp / "home").rglob("marks.json")]
            launcher_marks.table([r for r in runs if r])
        fsstate.removed(tmp)

    print(f"\n{args.jobs} × `{' '.join(COMMAND)}` (load average now {os.getloadavg()[0]:.2f}), jobs/s:")
    if floors:
        print(f"  floor (bare subprocess loop)  {spread([args.jobs / f for f in floors])}")
    if ends:
        print(f"  trainyard, end to end         {spread(ends)}")
        print(f"  trainyard, submit alone       {spread(submits)}")
        print(f"  server CPU s per 1,000 jobs   {spread(cpus)}")
        print(f"  launchers' CPU s per 1,000    {spread(launchers)}")
        print(f"  clients' CPU s per 1,000      {spread(clients)}")
    print("\ntargets:")
    complete = not errors and len(ends) == args.repeats
    if ends and floors:
        rate = statistics.median(ends)
        ratio = statistics.median(args.jobs / e for e in ends) / statistics.median(floors)
        ok = complete and rate >= TARGET_JOBS_PER_S
        note = "" if complete else f"  ({len(ends)}/{args.repeats} repeats measured: MISS)"
        print(f"  {'PASS' if ok else 'MISS'}  median end to end = {rate:.1f} jobs/s  "
              f"(target ≥ {TARGET_JOBS_PER_S:g}){note}")
        print(f"  info  trainyard time / floor time = {ratio:.1f}x  (floor {statistics.median(floors):.2f} s "
              f"for {args.jobs} commands)")
        cpu_per_job = (statistics.median(cpus) + statistics.median(launchers)) / 1000
        print(f"  info  server + launchers use {cpu_per_job * 1000:.1f} ms of CPU per job: at most "
              f"{(os.cpu_count() or 1) / cpu_per_job:.0f} jobs/s on {os.cpu_count()} idle cores, clients aside")
        # the server's Python runs one thread at a time (the GIL): its own CPU per job bounds it on any cores
        print(f"  info  the server alone uses {statistics.median(cpus):.1f} ms of CPU per job, most of it Python under "
              f"one lock: about {1000 / statistics.median(cpus):.0f} jobs/s at most, on any number of cores")
    else:
        print("  MISS  end to end: not measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
