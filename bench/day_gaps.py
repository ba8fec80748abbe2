"""Where a policy's GPU time went on a simulated day: ``scheduler.py --gaps`` (issue 20, target 3).

Useful work falls short of the bound in two ways: work that preemption threw away, and GPUs left idle. The
idle GPUs of each type are read after every cycle's decisions, weighted by the time to the next cycle, and split
by what waited then:

- *nothing waits for it*: no waiting job accepts the type (on a type the day's demand does not fill, most of
  its idle time is this, and the bound counts it as idle too);
- *no waiting job fits*: jobs that accept the type wait, but none would fit on one of its nodes now (the free
  GPUs are split across nodes, or the nodes' cores or memory are taken);
- *a waiting job fits*: one would fit now, and the policy held the room back (for a job whose victims are
  exiting, for nodes a job holds, or for a queue's quota), or the room freed since the last cycle (the day
  plans at most once a simulated minute).

The bound itself ignores when jobs arrive. :func:`timed_bound` counts each job's work only after its submit
time, at most its GPUs at once, over 15-minute slots (a max-flow); where it equals the bound, arrivals do not
explain any of the gap.
"""

from __future__ import annotations

import math
from collections import defaultdict

from trainyard.scheduler.simulate import Simulator

CAUSES = ("nothing waits for it", "no waiting job fits", "a waiting job fits")


class Idle:
    """Hooks a simulator: once it has run and :meth:`finish` was called, :attr:`gpu_seconds` holds its idle
    GPU-seconds by (GPU type, cause)."""

    def __init__(self, sim: Simulator) -> None:
        self.gpu_seconds: dict[tuple[str, str], float] = defaultdict(float)
        self._since, self._now = 0.0, []  # the last cycle's time, and its ((type, cause), idle GPUs)
        sim.on_cycle = lambda sim, _plan: self._count(sim.now, _idle_now(sim))

    def _count(self, now: float, idle: list) -> None:
        for key, gpus in self._now:
            self.gpu_seconds[key] += (now - self._since) * gpus
        self._since, self._now = now, idle

    def finish(self, until: float) -> dict[tuple[str, str], float]:
        """Counts the time from the last cycle to ``until``, the end of the run."""
        self._count(until, [])
        return self.gpu_seconds


def _idle_now(sim: Simulator) -> list[tuple[tuple[str, str], int]]:
    nodes: dict[str, list] = defaultdict(list)  # type -> nodes with a free GPU
    for n in sim.nodes.values():
        if n.gpus and n.free_gpu_ids:
            nodes[n.gpu_type].append(n)
    out = []
    for t, free in nodes.items():
        waiting = [j for j in sim.pending.values() if j.gpu and (not j.gpu_types or t in j.gpu_types)]
        if not waiting:
            cause = CAUSES[0]
        else:
            cause = CAUSES[2] if any(_fits(j, free) for j in waiting) else CAUSES[1]
        out.append(((t, cause), sum(len(n.free_gpu_ids) for n in free)))
    return out


def _fits(job, free: list) -> bool:
    """Would every replica of ``job`` fit on these nodes now (one replica a node, for a spread gang)?"""
    room = 0
    for n in free:
        if all(n.labels.get(k) == v for k, v in job.node_selector.items()):
            per = min(len(n.free_gpu_ids) // job.gpu, int(n.cpu_free // job.cpu) if job.cpu else job.replicas,
                      n.memory_free // job.memory if job.memory else job.replicas)
            room += min(per, 1) if job.placement == "spread" else per
            if room >= job.replicas:
                return True
    return False


def timed_bound(nodes, jobs, day: float, slot: float = 900.0) -> float | None:
    """GPU-seconds no policy can beat once arrivals count: a max-flow from each job (its work up to the day's
    end) to (GPU type, slot) pairs after its submit, at most its GPUs at once, into each type's capacity per
    slot. None without scipy."""
    try:
        import numpy as np
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import maximum_flow
    except ImportError:
        return None
    # maximum_flow takes integers: GPU-seconds, a job's rounded up, so that this stays a bound
    cap: dict[str, int] = defaultdict(int)
    for n in nodes:
        if n.gpus:
            cap[n.gpu_type] += n.gpus
    types = sorted(cap)
    slots = int(day // slot)
    gpu_jobs = [s for s in jobs if s.job.gpu]
    first = 2 + len(gpu_jobs)  # 0: source, 1: sink, then the jobs, then (type, slot)
    rows, cols, caps = [], [], []
    for i, s in enumerate(gpu_jobs):
        g = s.job.gpu * s.job.replicas
        rows.append(0), cols.append(2 + i), caps.append(math.ceil(min(s.duration, day - s.submit) * g))
        accepted = [types.index(t) for t in (s.job.gpu_types or types) if t in cap]
        for h in range(int(s.submit // slot), slots):
            most = math.ceil(g * ((h + 1) * slot - max(h * slot, s.submit)))
            for k in accepted:
                rows.append(2 + i), cols.append(first + k * slots + h), caps.append(most)
    for k, t in enumerate(types):
        for h in range(slots):
            rows.append(first + k * slots + h), cols.append(1), caps.append(int(cap[t] * slot))
    size = first + len(types) * slots
    graph = csr_matrix((np.array(caps, dtype=np.int32), (np.array(rows), np.array(cols))), shape=(size, size))
    return float(maximum_flow(graph, 0, 1).flow_value)


def summary(runs: dict, cap_gpu: float, bound: float, useful, names=("planner", "best-fit-decreasing")) -> str:
    """One line for ``--seeds``: per policy of ``names``, its distance below the bound and its parts, the idle ones
    summed over GPU types (types that nothing waits for are idle in the bound too, so they are left out)."""
    parts = []
    for name in names:
        out, _, _, idle = runs[name]
        by = {c: sum(v for (_, cause), v in idle.items() if cause == c) / cap_gpu * 100 for c in CAUSES[1:]}
        parts.append(f"{name} {(bound - useful(out)) / cap_gpu * 100:.2f} below the bound (lost "
                     f"{out.lost['gpu'] / cap_gpu * 100:.2f}, no fit {by[CAUSES[1]]:.2f}, held {by[CAUSES[2]]:.2f})")
    return "; ".join(parts)


def print_gaps(runs: dict, cap_gpu: float, bound: float, timed: float | None, useful) -> None:
    """Per policy: the gap to the bound, what preemption threw away, and the idle GPUs by type and cause, each
    in points of GPU capacity."""
    print("\n    where the GPU time went, in points of GPU capacity (--gaps)")
    if timed is not None:
        print(f"    the bound counting arrivals (15-min slots, each job at most its GPUs at once): "
              f"{timed / cap_gpu:.2%}, against {bound / cap_gpu:.2%} without")
    for name, (out, _, _, idle) in runs.items():
        types = sorted({t for t, _ in idle})
        print(f"    {name}: {(bound - useful(out)) / cap_gpu * 100:.2f} below the bound; work lost "
              f"{out.lost['gpu'] / cap_gpu * 100:.2f}; idle GPUs by type: "
              + "; ".join(f"{t} " + ", ".join(f"{c} {idle.get((t, c), 0.0) / cap_gpu * 100:.2f}" for c in CAUSES)
                          for t in types))
