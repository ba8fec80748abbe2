"""The launcher's own steps, from the ``marks.json`` each launcher writes when the server runs
with ``TRAINYARD_LAUNCH_MARKS`` set (see ``trainyard.launch.marks``); used by ``latency.py --marks``.

Each step is the span between two consecutive marks of one launcher (its threads' marks
interleaved in time), as wall time and as the launcher's CPU time (all its threads): on a
shared machine the CPU column is the steadier one, the gap between the two is time spent
waiting for a core or for another process (the command, the server).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

FIRST = "launch.json written"  # the engine's write, from the file's mtime
FORKED = "zygote: forked"  # the launcher's first mark when the zygote forked it
HANDED = "zygote: handed the attempt dir"  # ... when it was forked ahead, and waited (trainyard.launch.zygote)
BORN = (FORKED, HANDED)  # a forked child's CPU clock starts at zero: what it shows at its first mark is its own


def load(attempt_dir: Path, wait: float = 2.0) -> list[dict] | None:
    """The launcher's marks, sorted in time; it writes them after its exit report, so they may
    land a moment after the job ended."""
    deadline = time.monotonic() + wait
    while True:
        try:
            rows = json.loads((attempt_dir / "marks.json").read_text())
            break
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.005)
    rows.sort(key=lambda r: r["mono_ns"])
    try:
        written = (attempt_dir / "launch.json").stat().st_mtime_ns
    except OSError:
        return rows
    first = rows[0] if rows else None
    if first is not None:  # the engine's write, placed on the launcher's clocks by the wall clock
        rows.insert(0, {"name": FIRST, "wall_ns": written, "mono_ns": first["mono_ns"] - (first["wall_ns"] - written),
                        "thread_cpu_ns": first["thread_cpu_ns"], "cpu_ns": first["cpu_ns"]})
    return rows


def steps(rows: list[dict]) -> list[tuple[str, float, float]]:
    """(label, wall ms, launcher CPU ms) for each pair of consecutive marks."""
    out = []
    for a, b in zip(rows, rows[1:]):
        if b["name"] in BORN:
            cpu = b["cpu_ns"] / 1e6
        elif a["name"] == FIRST:  # the engine's, not the launcher's
            cpu = 0.0
        else:
            cpu = (b["cpu_ns"] - a["cpu_ns"]) / 1e6
        out.append((f"{a['name']} → {b['name']}", (b["mono_ns"] - a["mono_ns"]) / 1e6, cpu))
    return out


def table(runs: list[list[dict]]) -> None:
    """Median wall and CPU per step over the jobs that had it, in the order they happen."""
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    order: dict[str, list[int]] = {}
    totals, total_cpu = [], []
    for rows in runs:
        for i, (label, wall, cpu) in enumerate(steps(rows)):
            walls.setdefault(label, []).append(wall)
            cpus.setdefault(label, []).append(cpu)
            order.setdefault(label, []).append(i)
        launcher = [r for r in rows if r["name"] != FIRST]
        if len(launcher) > 1:
            totals.append((launcher[-1]["mono_ns"] - launcher[0]["mono_ns"]) / 1e6)
            born = launcher[0]["cpu_ns"] / 1e6 if launcher[0]["name"] in BORN else 0.0
            total_cpu.append(born + sum(cpu for _, _, cpu in steps(launcher)))
    if not runs:
        print("\nlauncher marks: none found (was the server started with TRAINYARD_LAUNCH_MARKS set?)")
        return
    print(f"\nlauncher steps (marks.json of {len(runs)} jobs; median wall / median launcher CPU, all threads;")
    print("a step seen in fewer jobs says in how many):")
    for label in sorted(walls, key=lambda k: (statistics.median(order[k]), -len(walls[k]))):
        seen = "" if len(walls[label]) == len(runs) else f"  (in {len(walls[label])} jobs)"
        print(f"  {label:<68} {statistics.median(walls[label]):7.2f} ms  cpu {statistics.median(cpus[label]):6.2f} ms{seen}")
    if totals:
        print(f"  {'first mark → last mark (wall; the command runs inside it)':<68} {statistics.median(totals):7.2f} ms  "
              f"cpu {statistics.median(total_cpu):6.2f} ms")
