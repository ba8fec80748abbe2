"""What a chatty job costs the server: a job logging every step, a reader of a big log.

    PYTHONPATH=src:bench .venv/bin/python bench/telemetry_bounds.py [--points 300000] [--log-mb 200]

Two servers side by side, each in a temporary home: one with ``metrics_keep: 0`` and ``log_keep: 0`` (every point
and every byte kept: the baseline, as before the bounds), one with the defaults. On each:

- a job logs ``--points`` steps of ``loss`` and every 1,000th a ``val``, as fast as ``trainyard.log_metrics``
  goes. Printed: the job's submit → finished time, the database's growth, one ``GET …/metrics`` (time and size).
- a job prints ``--log-mb`` MB; a client reads its log a page at a time, then follows it to its end.
  Printed: the server's peak anonymous memory (RssAnon: the SQLite file it maps is not counted) over what it
  held before.

Each line ends with the ratio bounded / unbounded. It exits 0 whatever the numbers: it is a measurement.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchserver import BenchServer


def anon(pid: int) -> int:
    """Bytes of the process's anonymous memory (its heap): what a reader's pages cost it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


def headers(server: BenchServer) -> dict[str, str]:
    return {"Authorization": "Bearer " + (server.home / "token").read_text().strip()}


def db_bytes(home: Path) -> int:
    return sum(f.stat().st_size for f in home.glob("trainyard.db*"))


def metrics_case(server: BenchServer, points: int) -> dict[str, float]:
    code = (f"import trainyard\nfor i in range({points}):\n    trainyard.log_metrics(step=i, loss=1 / (i + 1))\n"
            "    if i % 1000 == 0: trainyard.log_metrics(step=i, val=i / 1000)")
    before = db_bytes(server.home)
    t0 = time.monotonic()
    job = server.client.submit({"name": "steps", "command": [sys.executable, "-c", code]})
    assert job.wait(timeout=1800).status == "succeeded", job.info
    t1 = time.monotonic()
    with httpx.Client(headers=headers(server), timeout=600) as c:
        r = c.get(f"{server.url}/api/v1/jobs/{job.id}/metrics")
    t2 = time.monotonic()
    r.raise_for_status()
    return {"job s": t1 - t0, "database MiB": (db_bytes(server.home) - before) / 2**20, "read s": t2 - t1,
            "read MB": len(r.content) / 1e6, "points": len(r.json())}


def log_case(server: BenchServer, mb: int) -> dict[str, float]:
    code = f"import sys\nline = 'x' * 99 + '\\n'\nfor i in range({mb} * 10_000): sys.stdout.write(line)"
    job = server.client.submit({"name": "chatty", "command": [sys.executable, "-c", code]})
    assert job.wait(timeout=1800).status == "succeeded", job.info
    pid = server.proc.pid
    base = peak = anon(pid)
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, anon(pid))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    got, cursor, t0 = 0, 0, time.monotonic()
    try:
        with httpx.Client(headers=headers(server), timeout=600) as c:
            while page := c.get(f"{server.url}/api/v1/jobs/{job.id}/logs", params={"after": cursor}).json():
                if not page["chunks"]:
                    break
                got += sum(len(x["data"]) for x in page["chunks"])
                cursor = page["cursor"]
            with c.stream("GET", f"{server.url}/api/v1/jobs/{job.id}/logs", params={"follow": "true"}) as s:
                for line in s.iter_lines():
                    if line.startswith("event: end"):
                        break
    finally:
        stop.set()
        watcher.join()
    return {"read MB": got / 1e6, "read and follow s": time.monotonic() - t0, "server grew MiB": (peak - base) / 2**20}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=300_000, help="steps the metrics job logs (default 300,000)")
    ap.add_argument("--log-mb", type=int, default=200, help="MB the chatty job prints (default 200)")
    args = ap.parse_args()
    if args.points < 1 or args.log_mb < 1:
        ap.error("--points and --log-mb must be at least 1")
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="trainyard-bench-bounds-") as tmp:
        for label, config in (("unbounded", "metrics_keep: 0\nlog_keep: 0\n"), ("bounded (defaults)", "")):
            home = Path(tmp) / label.split()[0]
            home.mkdir()
            home = home / "home"  # the server's: its database files alone in it
            home.mkdir()
            (home / "server.yaml").write_text(config or "{}\n")
            server = BenchServer(home, [sys.executable, "-m", "trainyard", "server", "--config",
                                        str(home / "server.yaml"), "--container-runtime", "none"])
            try:
                results[label] = {"metrics": metrics_case(server, args.points), "log": log_case(server, args.log_mb)}
            finally:
                server.close()
    base, bounded = results["unbounded"], results["bounded (defaults)"]
    for case in ("metrics", "log"):
        print(f"{case}:")
        for key in base[case]:
            a, b = base[case][key], bounded[case][key]
            print(f"  {key:<20} unbounded {a:>10.2f}   bounded {b:>10.2f}   × {b / a if a else float('nan'):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
