"""A sweep's overhead: the same search through a trainyard sweep and by hand with Optuna in one process.

    PYTHONPATH=src:bench .venv/bin/python bench/sweep.py [--trials 20] [--parallel 1] [--repeats 3]

Each trial runs a short Python command that logs a score for 3 steps with ``trainyard.log_metrics``. The
baseline, measured in the same run and alternated with trainyard's side, is Optuna's own loop:
``study.optimize`` with an objective that runs the same command with ``subprocess`` (its metrics file in a
temporary folder) and reads the last score back — the floor of any search that runs each trial as a process.
trainyard's side is ``trainyard sweep`` (random sampler, the same seed) on a server of its own: each trial is a
job (queued, launched, its metrics reported and read back). Printed: each side's wall time for the whole
search (median of ``--repeats``), trainyard / baseline, and the overhead per trial in ms. It exits 0 whatever
the numbers: a measurement, with no target of an issue behind it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchserver import BenchServer

TRIAL = ("import trainyard\nx = {x}\n"
         "for step in range(3):\n    trainyard.log_metrics(step=step, score=1 - (x - 0.3) ** 2 * (step + 1))\n")


def command(x: str) -> list[str]:
    return [sys.executable, "-c", TRIAL.format(x=x)]


def by_hand(trials: int, parallel: int, seed: int) -> float:
    """Seconds for Optuna's own loop to run ``trials`` trials, each the command as a process."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="trainyard-bench-sweep-") as tmp:
        def objective(trial: optuna.Trial) -> float:
            x = trial.suggest_float("x", 0.0, 1.0)
            path = Path(tmp) / f"metrics-{trial.number}.jsonl"
            env = {**os.environ, "TRAINYARD_METRICS_FILE": str(path)}
            subprocess.run(command(repr(x)), env=env, check=True)
            return json.loads(path.read_text().splitlines()[-1])["values"]["score"]

        t0 = time.monotonic()
        study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=seed))
        study.optimize(objective, n_trials=trials, n_jobs=parallel)
        return time.monotonic() - t0


def through_trainyard(server: BenchServer, trials: int, parallel: int, seed: int) -> float:
    spec = {"name": "bench", "job": {"command": command("{{params.x}}"), "resources": {"cpu": "10m"}},
            "parameters": {"x": {"min": 0.0, "max": 1.0}}, "metric": {"name": "score", "goal": "maximize"},
            "method": "random", "seed": seed, "trials": trials, "parallel": parallel}
    t0 = time.monotonic()
    sweep = server.client.sweep(spec)
    done = server.client.sweeps.wait(sweep.id, every=0.02)
    elapsed = time.monotonic() - t0
    if done.status.value != "succeeded" or len(done.trials) != trials:
        raise RuntimeError(f"sweep {done.id} {done.status.value}: {done.reason}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if min(args.trials, args.parallel, args.repeats) < 1:
        ap.error("--trials, --parallel and --repeats must be at least 1")
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cpus; {args.trials} trials, {args.parallel} at "
          f"once, {args.repeats} repeats; load average {os.getloadavg()[0]:.2f}")
    hand, ours = [], []
    with tempfile.TemporaryDirectory(prefix="trainyard-bench-sweep-home-") as home:
        server = BenchServer(Path(home))
        try:
            through_trainyard(server, 2, 1, 0)  # warm: the zygote, the first study's imports
            for r in range(args.repeats):
                hand.append(by_hand(args.trials, args.parallel, r))
                ours.append(through_trainyard(server, args.trials, args.parallel, r))
                print(f"  repeat {r + 1}: by hand {hand[-1]:.2f} s, trainyard sweep {ours[-1]:.2f} s")
        finally:
            server.close()
    h, o = statistics.median(hand), statistics.median(ours)
    print(f"\nmedian: by hand (Optuna, subprocess per trial) {h:.2f} s, trainyard sweep {o:.2f} s: "
          f"× {o / h:.2f}, {(o - h) / args.trials * 1000:.0f} ms more per trial")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
