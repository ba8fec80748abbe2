"""The timing figures the tests used to assert, measured here instead (tests assert the behaviour).

    PYTHONPATH=src .venv/bin/python bench/timings.py [--n 5]

Each figure is printed next to a baseline measured in the same run on the same
machine: the start of a bare ``python -c pass`` (what any process of ours costs
before it does anything), so a slow, shared machine shows up in both.

- log latency: a job prints a line with its timestamp, through a real server;
  the SDK's ``logs(follow=True)`` sees it this long after (was: median < 0.5 s
  in tests/e2e/test_local_engine.py);
- report latency: a line in the launcher's output.log reaches a recording report
  server (was: < 0.5 s in tests/integration/test_launcher_report.py);
- cancel of a command that handles SIGTERM: SIGTERM to the launcher until it exits
  (was: < 3 s in tests/integration/test_launcher_cancel.py);
- gang fail-fast: a 2-replica gang where replica 1 exits 7 at once and replica 0
  would sleep 300 s, submit → failed (was: < 20 s in tests/e2e/test_gangs.py).

It is a measurement: it exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.integration.test_launcher_support import (  # noqa: E402
    ReportServer, log_of, make_config, script, start_launcher, wait_for,
)
from tests.support.servers import ServerProcess  # noqa: E402


def bare_start() -> float:
    t = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.monotonic() - t


def log_latency(srv: ServerProcess) -> float:
    code = "import time\nfor i in range(5):\n    print(f'line {i} {time.time()}', flush=True); time.sleep(0.2)"
    job = srv.client().submit({"name": "bench", "command": [sys.executable, "-c", code]})
    delays, buffer = [], ""
    for text in job.logs(follow=True):
        now = time.time()
        buffer += text
        while "\n" in buffer:
            line, buffer = buffer.split("\n", 1)
            delays.append(now - float(line.split()[2]))
    return statistics.median(delays)


def report_latency(tmp: Path) -> float:
    server = ReportServer()
    try:
        cmd = script(tmp, "job.py", "import time\nprint('hello early', flush=True)\ntime.sleep(1)\n")
        make_config(tmp / "attempt", server.url, cmd)
        proc = start_launcher(tmp / "attempt")
        wait_for(lambda: b"hello early" in log_of(tmp / "attempt"), every=0.002)
        seen = time.monotonic()
        wait_for(lambda: b"hello early" in server.log_bytes(), every=0.002)
        took = time.monotonic() - seen
        proc.communicate(timeout=30)
        return took
    finally:
        server.close()


def cancel_time(tmp: Path) -> float:
    server = ReportServer()
    try:
        cmd = script(tmp, "job.py", "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
                                    "print('ready', flush=True)\ntime.sleep(60)\n")
        make_config(tmp / "attempt", server.url, cmd, grace_period=30)
        proc = start_launcher(tmp / "attempt")
        wait_for(lambda: b"ready" in log_of(tmp / "attempt"))
        t = time.monotonic()
        proc.terminate()
        proc.communicate(timeout=60)
        return time.monotonic() - t
    finally:
        server.close()


def gang_fail_fast(srv: ServerProcess) -> float:
    code = "import os, sys, time\nif os.environ['RANK'] == '1': sys.exit(7)\ntime.sleep(300)"
    t = time.monotonic()
    job = srv.client().submit({"name": "gang", "command": [sys.executable, "-c", code], "replicas": 2,
                               "distributed": "torch", "grace_period": 2, "resources": {"cpu": 0.5}})
    job.wait(timeout=120)
    return time.monotonic() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=5, help="runs of each figure (median printed)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="trainyard-timings-") as d:
        tmp = Path(d)
        srv = ServerProcess(tmp / "home", ["--cpus", "2", "--memory", "4Gi"])
        srv.start()
        try:
            figures: dict[str, list[float]] = {"baseline: bare python start": [], "log latency (SDK follow)": [],
                                               "report latency (launcher → API)": [],
                                               "cancel, command handles SIGTERM": [], "gang fail-fast": []}
            for i in range(args.n):
                run = tmp / f"run{i}"
                for sub in ("r", "c"):
                    (run / sub).mkdir(parents=True)
                figures["baseline: bare python start"].append(bare_start())
                figures["log latency (SDK follow)"].append(log_latency(srv))
                figures["report latency (launcher → API)"].append(report_latency(run / "r"))
                figures["cancel, command handles SIGTERM"].append(cancel_time(run / "c"))
                figures["gang fail-fast"].append(gang_fail_fast(srv))
        finally:
            srv.stop_all()
    base = statistics.median(figures["baseline: bare python start"])
    print(f"python {sys.version.split()[0]}; n={args.n}; medians, and each as a multiple of the baseline")
    for name, xs in figures.items():
        m = statistics.median(xs)
        print(f"  {name:<36} {m * 1000:8.1f} ms   {m / base:6.1f}× baseline   (max {max(xs) * 1000:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
