"""What ready services cost an idle server: its CPU per second with ``--services`` ready services that get no
request, against the same server with none (the baseline, measured first in the same run).

    PYTHONPATH=src:bench .venv/bin/python bench/service_idle.py [--services 1,5] [--seconds 10] [--repeats 2]

Each service runs one replica of ``bench/serve_app.py`` (readiness probed every second). With services, the
leader's service loop looks at each one 4 times a second and probes each replica at its readiness period; this
measures what that costs while nothing happens (bench/RESULTS.md, session 21). CPU from psutil over
``--seconds``, each count ``--repeats`` times (the median). A measurement: exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchserver import BenchServer
from serve import APP, cpu_seconds


def cpu_per_second(proc: psutil.Process, seconds: float) -> float:
    """Milliseconds of CPU ``proc`` used per second over ``seconds``."""
    before = cpu_seconds(proc)
    time.sleep(seconds)
    return (cpu_seconds(proc) - before) / seconds * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--services", default="1,5", help="counts of ready services to measure, in order")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    counts = [int(n) for n in args.services.split(",")]
    with tempfile.TemporaryDirectory(prefix="trainyard-bench-idle-") as tmp:
        srv = BenchServer(Path(tmp) / "home", [sys.executable, "-m", "trainyard", "server", "--container-runtime", "none"])
        made = 0
        try:
            proc = psutil.Process(srv.proc.pid)
            time.sleep(3)  # past the start's own work
            base = statistics.median(cpu_per_second(proc, args.seconds) for _ in range(args.repeats))
            print(f"no service: {base:.1f} ms of CPU per second", flush=True)
            for n in counts:
                for i in range(made, n):
                    srv.client.services.apply({"name": f"idle{i}", "command": [sys.executable, APP],
                                               "resources": {"cpu": 0.1},
                                               "service": {"replicas": 1, "readiness": {"path": "/healthz",
                                                                                        "period": "1s"}}})
                made = max(made, n)
                for i in range(n):
                    srv.client.services.wait_ready(f"idle{i}", 1, timeout=120)
                time.sleep(3)  # the replicas' start is over
                got = statistics.median(cpu_per_second(proc, args.seconds) for _ in range(args.repeats))
                print(f"{n} ready service{'s' if n > 1 else ''}: {got:.1f} ms of CPU per second, "
                      f"{got - base:+.1f} over none ({(got - base) / n:.1f} a service), {got / max(base, 0.1):.1f} × none",
                      flush=True)
        finally:
            for i in range(made):
                srv.client.services.delete(f"idle{i}")
            while any(s.replicas for s in srv.client.services.list()):
                time.sleep(0.2)
            srv.close()


if __name__ == "__main__":
    main()
