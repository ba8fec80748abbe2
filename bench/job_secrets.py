"""What a job's secrets add to its start: submit → done of a trivial job naming 1 or 10 secrets, against the same
job naming none, side by side in one run.

    PYTHONPATH=src:bench .venv/bin/python bench/job_secrets.py [--n 30] [--rounds 3]

A job with secrets costs its launcher one more request (``POST /internal/attempts/ID/secrets``: the values,
opened with the server's key) before the command starts, and a pass of the masks over each log chunk it sends.
Each round runs ``--n`` jobs of each kind in turns (none, 1, 10, none, 1, 10 …), one at a time, and takes each
kind's median; printed are the medians over the rounds and each kind's ratio to none. There is no target: the
ratio says what the feature costs the one path every job takes. It is a measurement: it exits 0 whatever the
numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchserver import BenchServer

KINDS = {"none": {}, "1 secret": {"S0": "s0"}, "10 secrets": {f"S{i}": f"s{i}" for i in range(10)}}
PRINTS = "import os; print(' '.join(os.environ.get(f'S{i}', '-') for i in range(10)))"


def one(client, secrets: dict[str, str]) -> float:
    t0 = time.perf_counter()
    job = client.submit({"name": "b", "command": [sys.executable, "-c", PRINTS], "secrets": secrets,
                         "resources": {"cpu": 0.1}})
    info = client.wait(job.id, timeout=60)
    took = time.perf_counter() - t0
    if info.status.value != "succeeded":
        raise RuntimeError(f"{job.id} {info.status.value}: {info.reason}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ty-bench-secrets-") as tmp:
        srv = BenchServer(Path(tmp) / "home")
        try:
            c = srv.client
            for i in range(10):
                c.secrets.set(f"s{i}", f"value-{i}-" + "k" * 40)
            for kind in KINDS.values():  # warm: the zygote, the key, the first overlay venvs
                one(c, kind)
            medians: dict[str, list[float]] = {k: [] for k in KINDS}
            for r in range(args.rounds):
                times: dict[str, list[float]] = {k: [] for k in KINDS}
                for _ in range(args.n):
                    for name, kind in KINDS.items():
                        times[name].append(one(c, kind))
                for name in KINDS:
                    medians[name].append(statistics.median(times[name]))
                print(f"round {r + 1}: " + ", ".join(f"{k} {statistics.median(v) * 1000:.1f} ms"
                                                     for k, v in times.items()), flush=True)
        finally:
            srv.close()
    base = statistics.median(medians["none"])
    for name, m in medians.items():
        mid = statistics.median(m)
        print(f"{name:>10}: submit → done median {mid * 1000:.1f} ms (rounds {', '.join(f'{x * 1000:.1f}' for x in m)})"
              f"  ×{mid / base:.2f} of none")


if __name__ == "__main__":
    main()
