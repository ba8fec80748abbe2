"""bench/day_gaps.py: where a policy's GPU time went on a simulated day, by what waited while GPUs were idle."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from trainyard.scheduler.baselines import first_come
from trainyard.scheduler.model import Node, PendingJob, Queue
from trainyard.scheduler.plan import plan
from trainyard.scheduler.simulate import SimJob, Simulator

GiB = 2**30
# loaded from its file: bench/ on sys.path would shadow top-level names (auth, storage, ui) for every test after
_spec = importlib.util.spec_from_file_location("day_gaps", Path(__file__).resolve().parents[2] / "bench" / "day_gaps.py")
day_gaps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(day_gaps)
NOTHING, NO_FIT, FITS = day_gaps.CAUSES


def _nodes(n: int = 2) -> list[Node]:
    return [Node(f"a{i}", cpu=64, memory=512 * GiB, gpus=8, gpu_type="A100") for i in range(n)]


def _job(name: str, gpus: int, **kw) -> PendingJob:
    return PendingJob(name, queue=kw.pop("queue", "q"), cpu=1, memory=GiB, gpu=gpus, gpu_types=("A100",), **kw)


def _idle(policy, jobs: list[SimJob], until: float, queues=(Queue("q"),), nodes=None) -> dict:
    sim = Simulator(nodes or _nodes(), list(queues), policy)
    idle = day_gaps.Idle(sim)
    sim.run(jobs, until)
    return idle.finish(until)


def test_idle_gpus_are_split_by_whether_what_waits_could_use_them():
    # first-come: the 4-GPU job takes half of the first node, the first 8-GPU job the second; the second 8-GPU
    # job cannot use the 4 GPUs left (fragmentation) until the first one ends at 50 s; then nothing waits
    jobs = [SimJob(_job("small", 4, seq=0.0), 0.0, 100.0), SimJob(_job("big1", 8, seq=1.0), 0.0, 50.0),
            SimJob(_job("big2", 8, seq=2.0), 0.0, 50.0)]
    idle = _idle(first_come, jobs, 150.0)
    assert idle[("A100", NO_FIT)] == pytest.approx(4 * 50)
    # 50-100 s: 4 GPUs beside the small job; 100-150 s: all 16 (the second big job ends at 100 too)
    assert idle[("A100", NOTHING)] == pytest.approx(4 * 50 + 16 * 50)
    assert idle.get(("A100", FITS), 0.0) == 0.0  # first-come starts whatever fits


def test_room_a_policy_holds_back_from_a_job_that_fits_counts_apart():
    # a queue capped at 8 GPUs that may not borrow: its second job fits on the free node but waits for the quota
    capped = Queue("q", gpus={"*": 8}, borrowing=False)
    jobs = [SimJob(_job("first", 8, seq=0.0), 0.0, 100.0), SimJob(_job("second", 8, seq=1.0), 0.0, 100.0)]
    idle = _idle(plan, jobs, 200.0, queues=(capped,))
    assert idle[("A100", FITS)] == pytest.approx(8 * 100)
    # then it runs from 100 s, on one node, and nothing waits for the other
    assert idle[("A100", NOTHING)] == pytest.approx(8 * 100)
    assert idle.get(("A100", NO_FIT), 0.0) == 0.0


def test_the_bound_counting_arrivals_is_below_the_one_without_when_work_comes_late():
    pytest.importorskip("scipy")
    nodes = _nodes(1)
    day = 3600.0
    # 8 GPUs for an hour of work each, one at dawn and one with 15 minutes left: the late one can do 15 minutes
    jobs = [SimJob(_job("early", 8), 0.0, 3600.0), SimJob(_job("late", 8), 2700.0, 3600.0)]
    timed = day_gaps.timed_bound(nodes, jobs, day)
    # the machine can run one hour of 8 GPUs in all: the arrivals do not lower that here
    assert timed == pytest.approx(8 * 3600.0)
    # one job arriving late alone can use only what is left after it arrives
    assert day_gaps.timed_bound(nodes, jobs[1:], day) == pytest.approx(8 * 900.0)
