"""Trainyard on the Ray engine against Ray's own Jobs API, on the same Ray cluster, in the same run.

    .venv/bin/python bench/ray_engine.py [--n 10] [--burst 20] [--warmup 2]

Starts a Ray cluster on loopback (a head with 2 declared CPUs and one worker
with 2, each ``ray start`` in its own session) and a trainyard server with
``--engine ray`` on it. Then:

- latency: N trivial jobs (``python -c pass``) one after another, submit →
  finished, alternating trainyard and Ray Jobs (``JobSubmissionClient``,
  status polled every 10 ms) so noise hits both alike;
- throughput: a burst of B such jobs submitted at once, each asking 0.5 CPU
  (``entrypoint_num_cpus`` for Ray Jobs), timed until the last one finished.

Prints medians, p90, jobs/s and the ratios. Target: trainyard on Ray no slower
than Ray Jobs. It is a measurement: it exits 0 whatever the numbers.
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


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


class Trainyard:
    def __init__(self, server: BenchServer) -> None:
        self.client = server.client

    def submit(self, cpu: float = 1.0) -> str:
        return self.client.submit({"name": "bench", "command": COMMAND, "resources": {"cpu": cpu}}).id

    def wait(self, job_id: str) -> None:
        info = self.client.wait(job_id, timeout=300)
        if info.status.value != "succeeded":
            raise RuntimeError(f"trainyard job {job_id} {info.status.value}: {info.reason}")


class RayJobs:
    def __init__(self, dashboard_url: str) -> None:
        from ray.job_submission import JobSubmissionClient

        self.client = JobSubmissionClient(dashboard_url)

    def submit(self, cpu: float | None = None) -> str:
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
    system.wait(system.submit())
    return time.perf_counter() - t0


def burst(system, count: int) -> float:  # noqa: ANN001
    """Jobs per second for ``count`` jobs submitted at once."""
    t0 = time.perf_counter()
    ids = [system.submit(cpu=0.5) for _ in range(count)]
    for job_id in ids:
        system.wait(job_id)
    return count / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10, help="sequential jobs per system")
    ap.add_argument("--burst", type=int, default=20, help="jobs submitted at once per system")
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured jobs per system first")
    args = ap.parse_args()
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
    lat: dict[str, list[float]] = {"trainyard": [], "ray jobs": []}
    for i in range(args.n):  # alternate which goes first
        for name, system in ((("trainyard", ty), ("ray jobs", rj)) if i % 2 == 0 else
                             (("ray jobs", rj), ("trainyard", ty))):
            lat[name].append(one(system))
    rate = {"ray jobs": burst(rj, args.burst), "trainyard": burst(ty, args.burst)}

    print(f"\nsubmit → finished, {args.n} sequential `python -c pass` jobs each (after {args.warmup} warm-up):")
    for name, xs in lat.items():
        print(f"  {name:10s} median {statistics.median(xs) * 1000:7.0f} ms   p90 {pct(xs, 0.9) * 1000:7.0f} ms"
              f"   min {min(xs) * 1000:7.0f} ms")
    print(f"\nthroughput, {args.burst} jobs submitted at once (0.5 CPU each, 4 CPUs in the cluster):")
    for name, r in rate.items():
        print(f"  {name:10s} {r:6.2f} jobs/s")
    lat_ratio = statistics.median(lat["ray jobs"]) / statistics.median(lat["trainyard"])
    rate_ratio = rate["trainyard"] / rate["ray jobs"]
    print(f"\n  {'PASS' if lat_ratio >= 1 else 'MISS'}  median latency ray jobs / trainyard = {lat_ratio:.2f}x"
          "  (target ≥ 1x)")
    print(f"  {'PASS' if rate_ratio >= 1 else 'MISS'}  throughput trainyard / ray jobs = {rate_ratio:.2f}x"
          "  (target ≥ 1x)")


if __name__ == "__main__":
    sys.exit(main())
