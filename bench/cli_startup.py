"""Wall time of everyday CLI commands, one whole process each, for one or more source trees side by side.

    PYTHONPATH=src:.:bench .venv/bin/python bench/cli_startup.py [--n 12] [--src DIR ...]

Starts its own server (from this tree) in a temporary TRAINYARD_HOME and runs one job through the SDK,
then runs each command (``--version``, ``--help``, ``run --help``, ``ls``, ``show JOB``, ``logs JOB``,
``run SPEC --wait``) with each ``--src`` as PYTHONPATH (default: this tree's ``src``), interleaved with a
bare ``python -c pass`` and the order reversed every round, so the machine's load falls on all sides.
Prints the median and minimum of each, its ratio to the bare run's median, and the median import time
(``-X importtime``, all top-level imports summed) of each command. The machine is shared: read the
minimums beside the medians, and the load average printed with them.
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

BARE = [sys.executable, "-c", "pass"]


def timed(argv: list[str], env: dict[str, str] | None, cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def import_ms(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """The process's import time: every top-level import's cumulative time, summed (``-X importtime``)."""
    err = subprocess.run([sys.executable, "-X", "importtime", *argv[1:]], env=env, cwd=cwd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr
    rows = (line.removeprefix("import time:").split("|") for line in err.splitlines()
            if line.startswith("import time:") and "self [us]" not in line)
    return sum(int(cum) for _, cum, name in rows if not name.startswith("  ")) / 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=12, help="runs of each command per tree (default 12)")
    ap.add_argument("--src", action="append", type=Path, help="a tree's src folder (repeat to compare)")
    args = ap.parse_args()
    srcs = [p.resolve() for p in args.src or [Path(__file__).resolve().parents[1] / "src"]]
    with tempfile.TemporaryDirectory(prefix="trainyard-cli-bench-") as tmp:
        home = Path(tmp) / "home"
        server = BenchServer(home)
        try:
            job = server.client.submit({"name": "bench", "command": ["python", "-c", "print('hi')"]})
            job.wait(timeout=120)
            (home / "bench.yaml").write_text(json.dumps({"name": "bench", "command": ["python", "-c", "pass"]}))
            commands = [["--version"], ["--help"], ["run", "--help"], ["ls"], ["show", job.id], ["logs", job.id],
                        ["run", "bench.yaml", "--wait"]]
            measure(home, srcs, commands, args.n)
        finally:
            server.close()
    return 0


def measure(home: Path, srcs: list[Path], commands: list[list[str]], n: int) -> None:
    base = {k: v for k, v in os.environ.items() if k != "TRAINYARD_SERVER"} | {"TRAINYARD_HOME": str(home)}
    envs = {src: base | {"PYTHONPATH": str(src)} for src in srcs}
    sides = [("bare", None, BARE)] + [(" ".join(c), src, [sys.executable, "-m", "trainyard", *c])
                                      for c in commands for src in srcs]
    walls: dict[tuple, list[float]] = {(label, src): [] for label, src, _ in sides}
    imports: dict[tuple, list[float]] = {(label, src): [] for label, src, _ in sides if src}
    load0 = os.getloadavg()[0]
    for i in range(n):
        for label, src, argv in (sides if i % 2 == 0 else sides[::-1]):
            walls[label, src].append(timed(argv, envs.get(src), home))
            if src and i % 3 == 0:
                imports[label, src].append(import_ms(argv, envs[src], home))
    bare = statistics.median(walls["bare", None])
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cpus; n={n}; load average {load0:.2f} → "
          f"{os.getloadavg()[0]:.2f}; bare `python -c pass` median {bare * 1000:.1f} ms")
    for i, src in enumerate(srcs):
        print(f"  [{i}] {src}")
    print(f"  {'command':32s} {'tree':>4s} {'median':>9s} {'min':>9s} {'× bare':>7s} {'imports':>9s}")
    for (label, src), xs in walls.items():
        if src is None:
            continue
        med = statistics.median(xs)
        imp = statistics.median(imports[label, src])
        print(f"  {label[:32]:32s} {srcs.index(src):>4d} {med * 1000:7.1f}ms {min(xs) * 1000:7.1f}ms "
              f"{med / bare:6.1f}× {imp:7.1f}ms")


if __name__ == "__main__":
    sys.exit(main())
