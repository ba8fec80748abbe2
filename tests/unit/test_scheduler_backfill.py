"""Backfill around a reservation, a bounded wait for the big job, no deadlock of big gangs."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from trainyard.scheduler.baselines import first_come
from trainyard.scheduler.cycle import Options
from trainyard.scheduler.model import Node, PendingJob, ReplicaUse, RunningJob
from trainyard.scheduler.plan import plan
from trainyard.scheduler.simulate import SimJob, Simulator

GB = 10**9
HOUR = 3600.0


def nodes(n=2, gpus=4) -> list[Node]:
    return [Node(f"n{i}", 32, 256 * GB, gpus, "A100") for i in range(n)]


def job(id, seq, gpu=1, timeout=None, **kw) -> PendingJob:
    return PendingJob(id, seq=float(seq), gpu=gpu, memory=GB, timeout=timeout, **kw)


def test_small_jobs_backfill_only_when_their_timeout_ends_before_the_reservation():
    # given both nodes half busy until t=1000 and t=2000, and an 8-GPU gang at the head of the line
    cluster = nodes()
    for n in cluster:
        n.free_gpu_ids = ["2", "3"]
    live = [RunningJob("a#1", "a", replicas=[ReplicaUse("n0", 1, GB, ["0", "1"])], expected_end=1000.0),
            RunningJob("b#1", "b", replicas=[ReplicaUse("n1", 1, GB, ["0", "1"])], expected_end=2000.0)]
    pending = [job("big", 0, gpu=4, replicas=2), job("short", 1, timeout=500), job("long", 2, timeout=5000)]
    # when
    p = plan(cluster, pending, live, now=0)
    # then the gang holds both nodes from t=2000; the short job fits before that, the long one does not
    assert [(r.job_id, sorted(r.nodes), r.start) for r in p.reservations] == [("big", ["n0", "n1"], 2000.0)]
    assert "short" in p.admissions and "long" not in p.admissions
    assert "next to start in ≤ 33m: 2 nodes held for it" in p.reasons["big"]
    assert "a timeout ≤ 33m would let this one backfill" in p.reasons["long"]


def test_with_reserve_after_only_a_job_that_has_waited_that_long_holds_nodes():
    # given both nodes half busy, and two like 8-GPU gangs blocked: one just submitted, one waiting 2 h
    cluster = nodes()
    for n in cluster:
        n.free_gpu_ids = ["2", "3"]
    live = [RunningJob("a#1", "a", replicas=[ReplicaUse("n0", 1, GB, ["0", "1"])], expected_end=1000.0),
            RunningJob("b#1", "b", replicas=[ReplicaUse("n1", 1, GB, ["0", "1"])], expected_end=2000.0)]
    now, opt = 10 * HOUR, Options(reserve_after=HOUR)
    young = job("young", 0, gpu=4, replicas=2, submitted_at=now - 60)
    old = job("old", 1, gpu=4, replicas=2, submitted_at=now - 2 * HOUR)
    long = job("long", 2, timeout=5000)
    # when only the young one waits, nothing is held: work that would outlast a hold still starts
    p = plan(cluster, [young, long], live, now=now, options=opt)
    assert p.reservations == [] and "long" in p.admissions
    # and when the old one waits too, it holds the nodes, whichever of the two is first in line
    for line in ([young, old, long], [old, young, long]):
        p = plan(cluster, line, live, now=now, options=opt)
        assert [r.job_id for r in p.reservations] == ["old"] and "long" not in p.admissions


def test_work_without_a_timeout_cannot_backfill_into_held_nodes():
    cluster = nodes(1)
    cluster[0].free_gpu_ids = ["3"]
    live = [RunningJob("a#1", "a", replicas=[ReplicaUse("n0", 1, GB, ["0", "1", "2"])], expected_end=100.0)]
    p = plan(cluster, [job("big", 0, gpu=4), job("forever", 1)], live, now=0)
    assert "forever" not in p.admissions
    p = plan(cluster, [job("big", 0, gpu=4), job("quick", 1, timeout=50)], live, now=0)
    assert "quick" in p.admissions


def stream(seed: int, until: float, first: int = 1) -> list[SimJob]:
    """1-GPU jobs arriving every few minutes, each honest about its timeout."""
    rng, t, out = random.Random(seed), 0.0, []
    i = first
    while t < until:
        dur = rng.uniform(600, HOUR)
        out.append(SimJob(job(f"s{i}", i, timeout=dur * rng.uniform(1.0, 1.5)), t, dur))
        t += rng.uniform(60, 300)
        i += 1
    return out


def test_a_big_job_waits_at_most_as_long_as_the_work_already_running_allows():
    # given a cluster kept full by a stream of small jobs, and a whole-cluster gang arriving at t=2h
    small = stream(seed=7, until=12 * HOUR)
    big = SimJob(job("big", 0, gpu=4, replicas=2, timeout=HOUR), 2 * HOUR, HOUR)
    sim = Simulator(nodes(), policy=plan)
    # when
    out = sim.run(small + [big], until=12 * HOUR)
    # then it starts within the longest timeout of the small jobs (1.5 h), though small ones keep coming
    assert out.started["big"] - 2 * HOUR <= 1.5 * HOUR
    # and plain first-come starves it for the whole run
    base = Simulator(nodes(), policy=first_come).run(stream(seed=7, until=12 * HOUR) + [
        SimJob(job("big", 0, gpu=4, replicas=2, timeout=HOUR), 2 * HOUR, HOUR)], until=12 * HOUR)
    assert "big" not in base.started


def test_two_gangs_that_each_need_the_whole_cluster_both_run():
    gangs = [SimJob(job(g, i, gpu=4, replicas=2, timeout=HOUR), 0.0, HOUR) for i, g in enumerate(["g1", "g2"])]
    out = Simulator(nodes(), policy=plan).run(stream(seed=3, until=6 * HOUR, first=10) + gangs, until=8 * HOUR)
    assert {"g1", "g2"} <= set(out.finished)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(0, 10_000), st.floats(0, 4 * HOUR))
def test_no_starvation_the_big_jobs_wait_is_bounded_by_the_timeouts_ahead_of_it(n, seed, arrives):
    # given n nodes kept busy by small jobs that are honest about their timeouts (and cannot be preempted)
    small = stream(seed, until=10 * HOUR)
    for s in small:
        s.job.preemptible = False
        s.job.gpu = 1 + int(s.job.seq) % 2
    longest = max(s.job.timeout for s in small)
    big = SimJob(job("big", 0, gpu=4, replicas=n, priority=200, timeout=HOUR), arrives, HOUR)
    # when a whole-cluster gang of higher priority arrives
    out = Simulator(nodes(n), policy=plan).run(small + [big], until=arrives + longest + 2 * HOUR)
    # then it starts within the longest timeout of the work it must wait for
    assert "big" in out.started and out.started["big"] - arrives <= longest + 1e-6
