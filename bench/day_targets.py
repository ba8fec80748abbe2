"""The simulated busy day's targets (issue 20, target 3), and each target over several seeds.

One seed cannot judge a planner change: the day is chaotic, and a change that decides nothing
different at first can move a wait ratio by several × first-come later (bench/RESULTS.md, session
12). ``scheduler.py --seeds N`` therefore prints, per target, the median over seeds and how many pass.
"""

from __future__ import annotations

import statistics
from typing import NamedTuple

# useful work over the bound; over the best baseline (points of the bound); preemptions per job;
# work lost per GPU capacity; each size class's mean wait over first-come's
TARGET_UTIL, TARGET_MARGIN, TARGET_PREEMPT, TARGET_LOST, TARGET_WAIT = 0.95, 0.01, 0.10, 0.01, 2.0


class DayFigures(NamedTuple):
    """What the targets read off one simulated day; the busy day's figures are None on the others."""

    useful: float  # of the bound
    margin: float | None = None  # over the best baseline, of the bound
    best: str | None = None  # that baseline
    preempted: int | None = None
    preempt_share: float | None = None  # of jobs
    lost: float | None = None  # of GPU capacity
    wait_ratio: float | None = None  # the worst size class's mean wait over first-come's
    wait_class: str | None = None
    left: int | None = None  # jobs of normal priority never started
    crowded: tuple[str, float, float] | None = None  # the tightest GPU types, demand / capacity: all, normal+
    gaps: str | None = None  # with --gaps: where the planner's and best-fit-decreasing's GPU time went (day_gaps)


def seed_line(seed: int, f: DayFigures) -> str:
    line = f"    seed {seed}: useful {f.useful:.1%} of bound"
    if f.margin is None:
        return line
    return (f"{line} ({f.margin * 100:+.1f} points against {f.best}); preempted {f.preempted:,} "
            f"({f.preempt_share:.1%}); work lost {f.lost:.2%}; worst wait {f.wait_class} × {f.wait_ratio:.2f} "
            f"first-come; {f.left} of normal priority left" + (
                f" ({f.crowded[0]}: demand {f.crowded[1]:.0%} of capacity, {f.crowded[2]:.0%} of normal priority "
                f"and above)" if f.crowded else "")
            + (f"\n      gaps, points of GPU capacity: {f.gaps}" if f.gaps else ""))


# (target, figure, how it prints, passes)
TARGETS = [
    (f"useful ≥ {TARGET_UTIL:.0%} of bound", "useful", "{:.1%}".format, lambda x: x >= TARGET_UTIL),
    (f"useful ≥ best baseline + {TARGET_MARGIN * 100:.0f} point", "margin", lambda x: f"{x * 100:+.1f} points",
     lambda x: x >= TARGET_MARGIN),
    (f"preemptions ≤ {TARGET_PREEMPT:.0%} of jobs", "preempt_share", "{:.1%}".format, lambda x: x <= TARGET_PREEMPT),
    (f"work lost ≤ {TARGET_LOST:.0%} of GPU capacity", "lost", "{:.2%}".format, lambda x: x <= TARGET_LOST),
    (f"no size class's mean wait above {TARGET_WAIT:g} × first-come's", "wait_ratio", "× {:.2f}".format,
     lambda x: x <= TARGET_WAIT),
    ("nothing of normal priority left unstarted", "left", "{:g}".format, lambda x: x == 0),  # a median may be x.5
]


def print_seeds(load: str, seeds: list[int], figs: list[DayFigures]) -> None:
    """Each seed's figures, then per target the median (range) over seeds and how many pass."""
    print(f"\n  {load} day, seeds {seeds[0]}–{seeds[-1]} (verdicts above: seed {seeds[0]})")
    for seed, f in zip(seeds, figs):
        print(seed_line(seed, f))
    for title, field, fmt, ok in TARGETS:
        xs = [getattr(f, field) for f in figs]
        if xs[0] is None:
            continue
        passed = sum(1 for x in xs if ok(x))
        print(f"    target {title} across {len(xs)} seeds: median {fmt(statistics.median(xs))} "
              f"({fmt(min(xs))} to {fmt(max(xs))}), {passed} of {len(xs)} pass")
