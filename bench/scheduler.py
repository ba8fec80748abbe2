"""The scheduler's planning core at cluster scale, against simple baselines in the same run.

    .venv/bin/python bench/scheduler.py [--nodes 1000] [--jobs 10000] [--day-nodes 1000] [--seed 1] [--loads busy]
        [--seeds N] [--planner-options JSON] [--gaps]

(a) one planning cycle with 10,000 pending jobs on 1,000 heterogeneous nodes
    (several GPU types, CPU-only nodes, labels), cold (empty cluster) and
    steady (cluster full, 10,000 still waiting, with preemption candidates):
    median and range of the CPU time of repeated runs, each run alternating
    with first-come on the same inputs, so the ratio holds on a machine whose
    speed drifts.
(b) a simulated day (discrete events: arrivals and ends; the policy runs at
    each, at most once a simulated minute), saturated (GPU demand 1.5 ×
    capacity) and busy (0.9 ×): *useful* GPU work (allocated GPU time less the
    work preemption threw away) against the upper bound (the most of the demand
    the GPU types could absorb, each job only on the types it accepts: capacity
    or demand, whichever binds, per type), for the planner, first-fit-decreasing,
    best-fit-decreasing and first-come. Every target and ratio is on useful work.
(c) on the busy day: preemptions and work lost, mean and worst wait by job size
    class (a job still waiting at the end counts with its wait so far), and jobs
    of normal priority never started.

Prints PASS/MISS per target. A measurement: exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import platform
import random
import statistics
import sys
import time
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from trainyard.scheduler.baselines import best_fit_decreasing, first_come, first_fit_decreasing  # noqa: E402
from trainyard.scheduler.cycle import Options  # noqa: E402
from trainyard.scheduler.model import Node, PendingJob, Queue  # noqa: E402
from trainyard.scheduler.plan import plan  # noqa: E402
from trainyard.scheduler.simulate import SimJob, Simulator  # noqa: E402

import day_gaps  # noqa: E402
from day_targets import (TARGET_LOST, TARGET_MARGIN, TARGET_PREEMPT, TARGET_UTIL, TARGET_WAIT,  # noqa: E402
                         DayFigures, print_seeds)

GiB = 2**30
DAY = 86400.0
TARGET_CYCLE_S = 0.100
# (share of nodes, cores, memory GiB, gpus, type, labels)
NODE_MIX = [
    (0.30, 64, 256, 0, None, {"pool": "cpu"}),
    (0.20, 96, 1024, 8, "A100", {"pool": "train"}),
    (0.15, 192, 2048, 8, "H100", {"pool": "train", "ib": "true"}),
    (0.20, 32, 192, 4, "T4", {"pool": "infer"}),
    (0.15, 24, 128, 2, "RTX4090", {"pool": "dev"}),
]
TEAMS = ["vision", "nlp", "speech", "recsys", "research", "platform", "robotics", "ads"]
TEAM_WEIGHTS = [40, 20, 10, 8, 8, 6, 4, 4]  # one team floods the queue
SIZE_CLASSES = ["cpu", "1 GPU", "2-4 GPUs", "8 GPUs", "gang 16-64 GPUs"]


def make_nodes(n: int, rng: random.Random) -> list[Node]:
    nodes = []
    for share, cpu, mem, gpus, gtype, labels in NODE_MIX:
        for _ in range(round(n * share)):
            zone = rng.choice("abc")
            nodes.append(Node(f"{gtype or 'cpu'}-{len(nodes):04d}", cpu, mem * GiB, gpus, gtype,
                              {**labels, "zone": zone}))
    return nodes[:n]


def size_class(j: PendingJob) -> str:
    g = j.gpu * j.replicas
    return "cpu" if not g else "1 GPU" if g == 1 else "2-4 GPUs" if g <= 4 else "8 GPUs" if g <= 8 else "gang 16-64 GPUs"


def make_job(i: int, rng: random.Random, mean_minutes: float) -> tuple[PendingJob, float]:
    team = rng.choices(TEAMS, TEAM_WEIGHTS)[0]
    prio = rng.choices([0, 100, 200, 300], [10, 80, 8, 2])[0]
    k = rng.random()
    kw: dict = {}
    if k < 0.35:
        kw = dict(cpu=rng.choice([1, 2, 4, 8, 16]), memory=rng.choice([2, 4, 8, 16, 64]) * GiB)
        if rng.random() < 0.2:
            kw["node_selector"] = {"zone": rng.choice("abc")}
        scale = 1.0
    elif k < 0.70:
        kw = dict(cpu=4, memory=32 * GiB, gpu=1, gpu_types=rng.choice([("T4",), ("RTX4090", "T4"), ("A100",), ()]))
        scale = 1.0
    elif k < 0.85:
        g = rng.choice([2, 4])
        kw = dict(cpu=6 * g, memory=32 * g * GiB, gpu=g, gpu_types=rng.choice([("A100",), ("T4",), ("A100", "H100")]))
        scale = 1.5
    elif k < 0.95:
        kw = dict(cpu=64, memory=512 * GiB, gpu=8, gpu_types=rng.choice([("A100",), ("H100",), ("H100", "A100")]))
        scale = 2.0
    else:
        kw = dict(cpu=64, memory=512 * GiB, gpu=8, replicas=rng.choice([2, 4, 8]),
                  gpu_types=rng.choice([("H100",), ("A100",)]), placement=rng.choice(["pack", "spread"]))
        if kw["gpu_types"] == ("H100",):
            kw["node_selector"] = {"ib": "true"}
        scale = 2.5
    duration = max(60.0, rng.lognormvariate(0, 0.8) * mean_minutes * 60 * scale)
    timeout = None if rng.random() < 0.1 else round(duration * rng.uniform(1.05, 2.0))
    job = PendingJob(f"j{i:05d}", queue=team, team=team, priority=prio, seq=float(i), timeout=timeout, **kw)
    return job, duration


def queues() -> list[Queue]:
    qs = [Queue(t, team=t) for t in TEAMS]
    qs[0].gpus = {"*": 1200}  # the flooding team is capped, and borrows beyond its cap
    qs[1].gpus = {"H100": 400}
    return qs


def steady_state(nodes: list[Node], rng: random.Random, pending: int, churn: int):
    """Plan and apply (admit, preempt) until nothing changes, with enough jobs that ``pending`` still
    wait; then ``churn`` attempts end and as many new jobs arrive: the cycle after a typical event."""
    sim = Simulator(nodes, queues(), plan)
    n = 0
    while len(sim.pending) < pending or not sim.running:
        for _ in range(pending // 2):
            j = make_job(n, rng, 60)[0]
            sim.jobs[j.id] = SimJob(j, 0.0, 3600.0)
            sim.pending[j.id] = j
            n += 1
        for _ in range(100):
            p = sim.cycle()
            if not p.admissions and not p.preemptions:
                break
    for job_id in list(sim.pending)[pending - churn:]:  # keep the oldest: the line is exactly `pending` long
        del sim.pending[job_id]
    for aid in rng.sample(sorted(sim.running), min(churn, len(sim.running))):
        sim._release(aid)
    for i in range(churn):
        j = make_job(n + i, rng, 60)[0]
        sim.pending[j.id] = j
    return list(sim.nodes.values()), list(sim.pending.values()), list(sim.running.values()), sim.out.cycles, sim.now


def side_by_side(fns: list, repeat: int) -> tuple[list[list[float]], list]:
    """Each of ``fns`` timed ``repeat`` times, taking turns (which goes first alternates), so drift in
    the machine's speed hits all alike. Returns the CPU times of each and the last result of each.

    CPU time, not wall time: a cycle is one thread of pure Python, and on a machine shared with other
    work the wall clock mostly measures how long the scheduler of the OS kept it waiting."""
    times, outs = [[] for _ in fns], [None] * len(fns)
    for i in range(repeat):
        order = range(len(fns)) if i % 2 == 0 else reversed(range(len(fns)))
        for k in order:
            t0 = time.process_time()
            outs[k] = fns[k]()
            times[k].append(time.process_time() - t0)
    return times, outs


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.1f} ms (min {min(xs) * 1000:.1f}, max {max(xs) * 1000:.1f})"


def bench_cycle(args) -> None:
    rng = random.Random(args.seed)
    print(f"(a) one planning cycle: {args.jobs:,} pending jobs × {args.nodes:,} nodes; CPU time of {args.repeat} runs "
          f"each, alternating with first-come (submit order, first fit) on the same inputs")
    nodes = make_nodes(args.nodes, rng)
    jobs = [make_job(i, rng, 60)[0] for i in range(args.jobs)]
    qs = queues()
    (cold, base), (p, _) = side_by_side([lambda: plan(nodes, jobs, [], qs, 1000.0),
                                         lambda: first_come(nodes, jobs, [], qs, 1000.0)], args.repeat)
    cold_s = statistics.median(cold)
    print(f"    cold (empty cluster):  planner {spread(cold)}, first-come {spread(base)}: "
          f"× {cold_s / statistics.median(base):.2f} first-come; {len(p.admissions):,} admitted, "
          f"{len(p.reasons):,} reasons; {args.jobs / cold_s:,.0f} jobs decided/s")
    nodes_s, waiting, running, cycles, now = steady_state(make_nodes(args.nodes, random.Random(args.seed)), rng,
                                                          args.jobs, 50)
    (steady, base), (p, _) = side_by_side([lambda: plan(nodes_s, waiting, running, qs, now),
                                           lambda: first_come(nodes_s, waiting, running, qs, now)], args.repeat)
    steady_s = statistics.median(steady)
    print(f"    steady (after {cycles} cycles to a fixpoint with {len(running):,} running, 50 ended and 50 "
          f"arrived): planner {spread(steady)}, first-come {spread(base)}: × "
          f"{steady_s / statistics.median(base):.2f} first-come; {len(p.admissions):,} admitted, "
          f"{len(p.preemptions)} preemptions, {len(p.reasons):,} reasons; "
          f"{len(waiting) / steady_s:,.0f} jobs decided/s")
    for one in list(p.reasons.items())[:: max(1, len(p.reasons) // 3)][:3]:
        print(f"    e.g. {one[0]}: {one[1]}")
    print(f"    target cold ≤ {TARGET_CYCLE_S * 1000:.0f} ms: {'PASS' if cold_s <= TARGET_CYCLE_S else 'MISS'} "
          f"({cold_s * 1000:.1f} ms)")
    print(f"    target steady ≤ {TARGET_CYCLE_S * 1000:.0f} ms: {'PASS' if steady_s <= TARGET_CYCLE_S else 'MISS'} "
          f"({steady_s * 1000:.1f} ms)")


def day_workload(args, seed: int, load: float, backlog: float):
    """Jobs for a day: GPU demand ``load`` × what the cluster can run in a day, ``backlog`` of it
    waiting at dawn and the rest arriving through the first 80 % of the day."""
    rng = random.Random(seed)
    nodes = make_nodes(args.day_nodes, rng)
    cap_gpu = sum(n.gpus for n in nodes) * DAY
    jobs, demand, i = [], 0.0, 0
    while demand < load * cap_gpu:
        job, dur = make_job(i, rng, args.mean_minutes)
        submit = 0.0 if demand < backlog * cap_gpu else rng.uniform(0, DAY * 0.8)
        jobs.append(SimJob(job, submit, dur))
        demand += dur * job.gpu * job.replicas
        i += 1
    jobs.sort(key=lambda s: (s.submit, s.job.seq))
    for k, sj in enumerate(jobs):
        sj.job.seq = float(k)
    return nodes, jobs


def gpu_demand(nodes: list[Node], jobs: list[SimJob], keep=lambda job: True) -> tuple[dict, dict]:
    """GPU-seconds of capacity per GPU type over the day, and of demand (of the jobs ``keep`` picks, each counted
    up to the day's end) per set of types the jobs accept."""
    cap: dict[str, float] = {}
    for n in nodes:
        if n.gpus:
            cap[n.gpu_type] = cap.get(n.gpu_type, 0.0) + n.gpus * DAY
    demand: dict[frozenset, float] = {}
    for s in jobs:
        if s.job.gpu and keep(s.job):
            key = frozenset(t for t in (s.job.gpu_types or cap) if t in cap)
            demand[key] = demand.get(key, 0.0) + min(s.duration, DAY - s.submit) * s.job.gpu * s.job.replicas
    return cap, demand


def gpu_bound(nodes: list[Node], jobs: list[SimJob]) -> float:
    """GPU-seconds no policy can beat: the most of the day's demand (each job counted up to the day's
    end) that the GPU types could absorb with each job only on types it accepts. That is a max-flow
    from job groups (by accepted types) to GPU types (capacity × day); by max-flow = min-cut it is the
    least, over sets T of types, of T's capacity plus the demand of the groups not confined to T."""
    cap, demand = gpu_demand(nodes, jobs)
    types = sorted(cap)
    return min(sum(cap[t] for t in cut) + sum(d for g, d in demand.items() if not g <= set(cut))
               for r in range(len(types) + 1) for cut in combinations(types, r))


def tightest(nodes: list[Node], jobs: list[SimJob], keep=lambda job: True,
             among: tuple[str, ...] | None = None) -> tuple[float, tuple[str, ...]]:
    """The set of GPU types (``among`` alone, if given) whose capacity the demand confined to them fills most:
    (demand / capacity, the types). Above 1, no policy can run all of that work by the day's end: some of it
    starts late or not at all (Hall's condition, of which the bound above is the max-flow form)."""
    cap, demand = gpu_demand(nodes, jobs, keep)
    types = sorted(cap)
    cuts = [among] if among else [cut for r in range(1, len(types) + 1) for cut in combinations(types, r)]
    return max((sum(d for g, d in demand.items() if g <= set(cut)) / sum(cap[t] for t in cut), cut) for cut in cuts)


POLICIES = [("planner", plan), ("first-fit-decreasing", first_fit_decreasing),
            ("best-fit-decreasing", best_fit_decreasing), ("first-come", first_come)]
BASELINES = [name for name, _ in POLICIES[1:]]
LOADS = [("saturated", 1.5, 0.5), ("busy", 0.9, 0.1)]  # GPU demand × capacity, and the part waiting at dawn


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def useful(o) -> float:
    """GPU-seconds of work that was kept: allocated, less what preemption threw away."""
    return o.busy["gpu"] - o.lost["gpu"]


def bench_day(args) -> None:
    print(f"\n(b) useful GPU work over a simulated day on {args.day_nodes:,} nodes (planning at most every "
          f"{args.tick:g} simulated s), against the bound and the baselines in the same run")
    seeds = range(args.seed, args.seed + args.seeds)
    for load, demand, backlog in LOADS:
        if load not in args.loads:
            continue
        figs = []
        for seed in seeds:
            if seed == args.seed:
                figs.append(one_day(args, seed, load, demand, backlog))
                continue
            # the verdicts read the first seed in full; the others give only their figures, below
            with contextlib.redirect_stdout(io.StringIO()):
                figs.append(one_day(args, seed, load, demand, backlog))
        if len(figs) > 1:
            print_seeds(load, list(seeds), figs)


def one_day(args, seed: int, load: str, demand: float, backlog: float) -> DayFigures:
    runs, idles = {}, {}
    for name, policy in POLICIES:
        if name == "planner" and args.planner_options is not None:
            policy = _with_options(args.planner_options)
        nodes, jobs = day_workload(args, seed, demand, backlog)
        t0 = time.perf_counter()
        sim = Simulator(nodes, queues(), policy)
        idle = day_gaps.Idle(sim) if args.gaps else None
        out = sim.run(jobs, DAY, tick=args.tick)
        if idle is not None:
            idles[name] = idle.finish(DAY)
        runs[name] = (out, jobs, time.perf_counter() - t0)
    cap = {"gpu": sum(n.gpus for n in nodes) * DAY, "cpu": sum(n.cpu for n in nodes) * DAY}
    bound = gpu_bound(nodes, jobs)
    print(f"  {load}: {len(jobs):,} jobs, GPU demand {demand:.1f} × capacity, {backlog:.0%} of it waiting at "
          f"dawn; bound {bound / cap['gpu']:.1%} of GPU capacity (max-flow of demand onto the types it accepts)")
    full, types = tightest(nodes, jobs)
    normal = tightest(nodes, jobs, lambda j: j.priority >= 100, types)[0]
    crowded = ("+".join(types), full, normal)
    print(f"  the tightest GPU types: {crowded[0]}, the demand confined to them {full:.1%} of their capacity "
          f"(of normal priority and above: {normal:.1%})")
    print(f"    {'policy':22} {'GPU alloc':>9} {'work lost':>10} {'useful':>8} {'useful/bound':>13} "
          f"{'CPU util':>9} {'cycles':>7} {'preempted':>10} {'wall':>7}")
    for name, (o, _, wall) in runs.items():
        print(f"    {name:22} {o.busy['gpu'] / cap['gpu']:9.1%} {o.lost['gpu'] / cap['gpu']:10.2%} "
              f"{useful(o) / cap['gpu']:8.1%} {useful(o) / bound:13.1%} {o.busy['cpu'] / cap['cpu']:9.1%} "
              f"{o.cycles:7,} {o.preempted:10,} {wall:6.1f}s")
    gaps = None
    if args.gaps:
        with_idle = {k: (*v, idles[k]) for k, v in runs.items()}
        day_gaps.print_gaps(with_idle, cap["gpu"], bound, day_gaps.timed_bound(nodes, jobs, DAY), useful)
        gaps = day_gaps.summary(with_idle, cap["gpu"], bound, useful)
    mine = useful(runs["planner"][0]) / bound
    best = max(BASELINES, key=lambda b: useful(runs[b][0]))
    ratios = ", ".join(f"× {useful(runs['planner'][0]) / useful(runs[b][0]):.3f} {b}" for b in BASELINES)
    print(f"    planner useful work {ratios}")
    print(f"    target useful ≥ {TARGET_UTIL:.0%} of bound: {verdict(mine >= TARGET_UTIL)} ({mine:.1%})")
    if load != "busy":
        return DayFigures(mine)
    o = runs["planner"][0]
    theirs = useful(runs[best][0]) / bound
    print(f"    target useful ≥ best baseline + {TARGET_MARGIN * 100:.0f} point: "
          f"{verdict(mine >= theirs + TARGET_MARGIN)} ({mine:.1%} against {best} {theirs:.1%}: "
          f"{(mine - theirs) * 100:+.1f} points)")
    share = o.preempted / len(jobs)
    print(f"    target preemptions ≤ {TARGET_PREEMPT:.0%} of jobs: {verdict(share <= TARGET_PREEMPT)} "
          f"({o.preempted:,} for {len(jobs):,} jobs, {share:.1%})")
    lost = o.lost["gpu"] / cap["gpu"]
    print(f"    target work lost ≤ {TARGET_LOST:.0%} of GPU capacity: {verdict(lost <= TARGET_LOST)} "
          f"({lost:.2%})")
    (ratio, cls), left = bench_waits(runs)
    return DayFigures(mine, mine - theirs, best, o.preempted, share, lost, ratio, cls, left, crowded, gaps)


def _with_options(opt: Options):
    return lambda *a: plan(*a, options=opt)


def planner_options(text: str) -> Options:
    """``--planner-options '{"reserve_after": 300}'``: a variant of the planner's Options for the days."""
    try:
        return Options(**json.loads(text))
    except (ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def bench_waits(runs) -> tuple[tuple[float, str], int]:
    """Prints the waits; returns the planner's worst (ratio to first-come, class) and its
    normal-priority jobs never started."""
    print("\n(c) wait by job size class on the busy day, minutes: mean / worst, and jobs never started")
    for title, keep in [("all priorities", lambda j: True), ("normal priority (100)", lambda j: j.priority == 100)]:
        print(f"    {title}")
        print(f"    {'class':16}" + "".join(f"{name:>24}" for name in runs))
        for cls in SIZE_CLASSES:
            row = f"    {cls:16}"
            for name, (o, jobs, _) in runs.items():
                picked = [s for s in jobs if size_class(s.job) == cls and keep(s.job)]
                waits = [(o.started.get(s.job.id, DAY) - s.submit) / 60 for s in picked]
                left = sum(1 for s in picked if s.job.id not in o.started)
                cell = f"{statistics.mean(waits):5.0f} / {max(waits):5.0f}" + (f" ({left} left)" if left else "")
                row += f"{cell:>24}" if waits else f"{'-':>24}"
            print(row)
    worst = []
    for base in BASELINES:
        ratios = []
        for cls in SIZE_CLASSES:
            m = [_mean_wait(runs[k], cls) for k in ("planner", base)]
            if m[0] is not None and m[1]:
                ratios.append(f"{cls} × {m[0] / m[1]:.2f}")
                if base == "first-come":
                    worst.append((m[0] / m[1], cls))
        print(f"    planner / {base} mean wait (all priorities): " + ", ".join(ratios))
    top = max(worst)
    print(f"    target no size class's mean wait above {TARGET_WAIT:g} × first-come's: "
          f"{verdict(top[0] <= TARGET_WAIT)} (worst: {top[1]} × {top[0]:.2f})")
    for name, (o, jobs, _) in runs.items():
        left = {cls: sum(1 for s in jobs if size_class(s.job) == cls and s.job.priority == 100
                         and s.job.id not in o.started) for cls in SIZE_CLASSES}
        print(f"    {name}: jobs of normal priority never started: " + ", ".join(f"{c} {n}" for c, n in left.items()))
        if name == "planner":
            n = sum(left.values())
            print(f"    target nothing of normal priority left unstarted: {verdict(not n)} ({n} left)")
    return top, n


def _mean_wait(run, cls):
    o, jobs, _ = run
    w = [(o.started.get(s.job.id, DAY) - s.submit) for s in jobs if size_class(s.job) == cls]
    return statistics.mean(w) if w else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--day-nodes", type=int, default=1000)
    ap.add_argument("--mean-minutes", type=float, default=90.0, help="median job duration, minutes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seeds", type=int, default=1,
                    help="simulate each day for seeds SEED .. SEED+N-1; verdicts stay on SEED, with a line "
                         "per target across them")
    ap.add_argument("--tick", type=float, default=60.0, help="simulated seconds between planning cycles at most")
    ap.add_argument("--skip-day", action="store_true")
    ap.add_argument("--skip-cycle", action="store_true")
    ap.add_argument("--loads", nargs="+", choices=[name for name, _, _ in LOADS], default=[n for n, _, _ in LOADS],
                    help="which simulated days to run (default: all)")
    ap.add_argument("--gaps", action="store_true",
                    help="on the simulated days, where each policy's GPU time went: work lost, and idle GPUs by "
                         "type and by what waited then (bench/day_gaps.py); the wall column then includes it")
    ap.add_argument("--planner-options", type=planner_options, default=None,
                    help="JSON object of scheduler Options fields for the planner on the simulated days")
    args = ap.parse_args()
    if args.planner_options is not None:
        print(f"planner options: {args.planner_options}")
    print(f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; plan() pauses the garbage collector "
          f"for the length of a cycle (gc {'on' if gc.isenabled() else 'off'} outside)")
    if not args.skip_cycle:
        bench_cycle(args)
    if not args.skip_day:
        bench_day(args)


if __name__ == "__main__":
    main()
