"""Trainyard on the Ray engine against Ray's own Jobs API, on the same Ray cluster, in the same run.

    .venv/bin/python bench/ray_engine.py [--n 10] [--burst 20] [--repeats 3] [--warmup 2]

Starts a Ray cluster on loopback (a head with 2 declared CPUs and one worker
with 2, each ``ray start`` in its own session) and a trainyard server with
``--engine ray`` on it. Then:

- latency: N trivial jobs (``python -c pass``) one after another, submit →
  finished, alternating trainyard and Ray Jobs (``JobSubmissionClient``,
  status polled every 10 ms) so noise hits both alike; each asks 1 CPU on
  both sides (``entrypoint_num_cpus`` for Ray Jobs);
- throughput: ``--repeats`` bursts per side of B such jobs submitted at once,
  alternating which side goes first, each job asking 0.5 CPU on both sides,
  timed until the last one finished; the median burst counts.

Prints every burst, medians, p90 and spread, and PASS/MISS against the targets
(trainyard on Ray ≥ 3x Ray Jobs on both); a run where any job or burst failed
is a MISS. It is a measurement: it exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the loopback cluster helper is shared with the tests

from benchserver import BenchServer  # noqa: E402
from tests.support.ray_cluster import RayCluster, ray_bin  # noqa: E402

COMMAND = [sys.executable, "-c", "pass"]
ENTRYPOINT = f"{sys.executable} -c pass"
LATENCY_CPU, BURST_CPU = 1.0, 0.5  # asked by both sides alike (Ray Jobs: entrypoint_num_cpus)
TARGET = 3.0  # issue 20: trainyard on Ray at least 3x Ray Jobs, on latency and on throughput


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


class Trainyard:
    def __init__(self, server: BenchServer) -> None:
        self.client = server.client

    def submit(self, cpu: float) -> str:
        return self.client.submit({"name": "bench", "command": COMMAND, "resources": {"cpu": cpu}}).id

    def wait(self, job_id: str) -> None:
        info = self.client.wait(job_id, timeout=300)
        if info.status.value != "succeeded":
            raise RuntimeError(f"trainyard job {job_id} {info.status.value}: {info.reason}")


class RayJobs:
    def __init__(self, dashboard_url: str) -> None:
        from ray.job_submission import JobSubmissionClient

        self.client = JobSubmissionClient(dashboard_url)

    def submit(self, cpu: float) -> str:
        return self.client.submit_job(entrypoint=ENTRYPOINT, entrypoint_num_cpus=cpu)

    def wait(self, job_id: str) -> None:
        from ray.job_submission import JobStatus

        while True:
            status = self.client.get_job_status(job_id)
            if status.is_terminal():
                if status != JobStatus.SUCCEEDED:
                    raise RuntimeError(f"ray job {job_id} {status}")
                return
            time.sleep(0.01)


def one(system) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    system.wait(system.submit(cpu=LATENCY_CPU))
    return time.perf_counter() - t0


def burst(system, count: int) -> float:  # noqa: ANN001
    """Jobs per second for ``count`` jobs submitted at once."""
    t0 = time.perf_counter()
    ids = [system.submit(cpu=BURST_CPU) for _ in range(count)]
    for job_id in ids:
        system.wait(job_id)
    return count / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10, help="sequential jobs per system")
    ap.add_argument("--burst", type=int, default=20, help="jobs submitted at once per system")
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured jobs per system first")
    ap.add_argument("--repeats", type=int, default=3, help="bursts per system, alternating (default 3)")
    args = ap.parse_args()
    if min(args.n, args.burst, args.repeats) < 1 or args.warmup < 0:
        ap.error("--n, --burst and --repeats must be at least 1, --warmup at least 0")
    try:
        import ray  # noqa: F401
    except ImportError:
        print("ray is not installed: pip install 'trainyard[ray]'", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="trainyard-bench-ray-") as tmp:
        cluster = RayCluster(Path(tmp) / "ray", ray_bin())
        server = None
        try:
            t0 = time.perf_counter()
            cluster.start_head(cpus=2)
            cluster.add_worker("worker", cpus=2)
            print(f"ray cluster: head + 1 worker, 4 CPUs declared, up in {time.perf_counter() - t0:.1f} s")
            server = BenchServer(Path(tmp) / "home", [sys.executable, "-m", "trainyard", "server",
                                                      "--engine", "ray", "--ray-address", cluster.address])
            measure(args, Trainyard(server), RayJobs(cluster.dashboard_url))
        finally:
            if server is not None:
                server.close()
            cluster.stop()
    return 0


def measure(args: argparse.Namespace, ty: Trainyard, rj: RayJobs) -> None:
    for _ in range(args.warmup):
        one(ty), one(rj)
    systems = {"trainyard": ty, "ray jobs": rj}
    lat: dict[str, list[float]] = {name: [] for name in systems}
    rate: dict[str, list[float]] = {name: [] for name in systems}
    failed: list[str] = []
    for i in range(args.n):  # alternate which goes first
        for name in (("trainyard", "ray jobs") if i % 2 == 0 else ("ray jobs", "trainyard")):
            try:
                lat[name].append(one(systems[name]))
            except Exception as e:  # recorded; the verdict becomes a MISS
                failed.append(f"latency {name}: {e}")
    for i in range(args.repeats):
        for name in (("ray jobs", "trainyard") if i % 2 == 0 else ("trainyard", "ray jobs")):
            try:
                rate[name].append(burst(systems[name], args.burst))
            except Exception as e:
                failed.append(f"burst {name}: {e}")
            print(f"  burst {i + 1} {name:10s} {rate[name][-1] if len(rate[name]) > i else float('nan'):6.2f} jobs/s")

    print(f"\nsubmit → finished, {args.n} sequential `python -c pass` jobs each ({LATENCY_CPU:g} CPU on both sides, "
          f"after {args.warmup} warm-up):")
    for name, xs in lat.items():
        if xs:
            print(f"  {name:10s} n={len(xs):<3} median {statistics.median(xs) * 1000:7.0f} ms   "
                  f"p90 {pct(xs, 0.9) * 1000:7.0f} ms   min {min(xs) * 1000:7.0f} ms   max {max(xs) * 1000:7.0f} ms")
    print(f"\nthroughput, {args.repeats} bursts of {args.burst} jobs submitted at once per side, alternating "
          f"({BURST_CPU:g} CPU each on both sides, 4 CPUs in the cluster):")
    for name, rs in rate.items():
        if rs:
            print(f"  {name:10s} median {statistics.median(rs):6.2f} jobs/s   (min {min(rs):.2f}, max {max(rs):.2f})")
    for f in failed:
        print(f"  FAILED {f}")
    complete = not failed
    print()
    if lat["trainyard"] and lat["ray jobs"]:
        r = statistics.median(lat["ray jobs"]) / statistics.median(lat["trainyard"])
        print(f"  {'PASS' if complete and r >= TARGET else 'MISS'}  median latency ray jobs / trainyard = {r:.2f}x"
              f"  (target ≥ {TARGET:g}x){'' if complete else ' — not every run measured'}")
    else:
        print("  MISS  latency: not measured")
    if rate["trainyard"] and rate["ray jobs"]:
        r = statistics.median(rate["trainyard"]) / statistics.median(rate["ray jobs"])
        print(f"  {'PASS' if complete and r >= TARGET else 'MISS'}  median throughput trainyard / ray jobs = {r:.2f}x"
              f"  (target ≥ {TARGET:g}x){'' if complete else ' — not every run measured'}")
    else:
        print("  MISS  throughput: not measured")


if __name__ == "__main__":
    sys.exit(main())
