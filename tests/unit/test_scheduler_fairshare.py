"""Fair share over time: a team that submits 1,000 jobs does not lock out one that submits a few."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from trainyard.scheduler.baselines import first_come
from trainyard.scheduler.cycle import Options
from trainyard.scheduler.fairshare import Shares
from trainyard.scheduler.model import Node, PendingJob, ReplicaUse, RunningJob
from trainyard.scheduler.plan import plan
from trainyard.scheduler.simulate import SimJob, Simulator

GB = 10**9
HOUR = 3600.0


def cluster() -> list[Node]:
    return [Node(f"n{i}", 32, 256 * GB, 4, "A100") for i in range(2)]


def workload(seed: int) -> list[SimJob]:
    rng = random.Random(seed)
    flood = [SimJob(PendingJob(f"a{i}", team="a", seq=i, gpu=1, memory=GB), 0.0, rng.uniform(0.8, 1.2) * HOUR)
             for i in range(1000)]
    few = [SimJob(PendingJob(f"b{i}", team="b", seq=1000 + i, gpu=1, memory=GB), 0.5 * HOUR, rng.uniform(0.8, 1.2) * HOUR)
           for i in range(6)]
    return flood + few


def test_the_small_team_gets_its_share_as_soon_as_room_frees():
    # given team a's 1,000 jobs fill the cluster, then team b submits 6
    most_b = 0

    def watch(sim: Simulator, _plan) -> None:
        nonlocal most_b
        most_b = max(most_b, sum(1 for r in sim.running.values() if r.team == "b"))

    sim = Simulator(cluster(), policy=plan)
    sim.on_cycle = watch
    # when
    out = sim.run(workload(1), until=6 * HOUR)
    # then b reaches half the GPUs (its dominant share equals a's) and all its jobs start within ~2 rounds
    assert most_b == 4
    assert max(out.started[f"b{i}"] for i in range(6)) <= 0.5 * HOUR + 2.5 * HOUR
    # while plain first-come makes b wait behind all 1,000
    base = Simulator(cluster(), policy=first_come).run(workload(1), until=6 * HOUR)
    assert not any(f"b{i}" in base.started for i in range(6))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0, 8), st.floats(0, 64), st.integers(0, 4)), max_size=12))
def test_dominant_share_is_the_largest_share_of_any_resource(uses):
    shares = Shares(cpu=64, mem=256, gpus={"A100": 8, "T4": 4})
    total: dict[str, list] = {}
    for team, cpu, mem, gpus in uses:
        gtype = "A100" if gpus % 2 else "T4"
        shares.add(team, cpu, mem, gtype, gpus)
        t = total.setdefault(team, [0.0, 0.0, {"A100": 0, "T4": 0}])
        t[0] += cpu
        t[1] += mem
        t[2][gtype] += gpus
    for team, (cpu, mem, g) in total.items():
        expect = max(cpu / 64, mem / 256, g["A100"] / 8, g["T4"] / 4)
        assert abs(shares.of(team) - expect) < 1e-9


def test_fair_share_never_holds_a_job_back_longer_than_the_wait_bound():
    # given team heavy already uses most of the cores, and one GPU is free
    nodes = [Node("gpu", 32, 256 * GB, 1, "A100"), Node("cpu", 32, 256 * GB, cpu_free=2)]
    busy = [RunningJob("h#1", "h", team="heavy", replicas=[ReplicaUse("cpu", 30, GB, [])])]

    def line(heavy_waited: float) -> list[PendingJob]:
        return [PendingJob("heavy", team="heavy", seq=0, submitted_at=10 * HOUR - heavy_waited, gpu=1, memory=GB),
                PendingJob("light", team="light", seq=1, submitted_at=10 * HOUR, gpu=1, memory=GB)]

    # then while heavy's job has waited less than the 4 h bound the lighter team goes first; after, it does
    # (each job needs the whole 1-GPU node: the starvation rule, which would put heavy's first, is off)
    fair = Options(starve_after=None)
    assert list(plan(nodes, line(3 * HOUR), busy, now=10 * HOUR, options=fair).admissions) == ["light"]
    assert list(plan(nodes, line(5 * HOUR), busy, now=10 * HOUR, options=fair).admissions) == ["heavy"]
