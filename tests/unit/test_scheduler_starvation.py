"""Starved jobs (waited past ``Options.starve_after``, when set) go first in line and hold the nodes they need."""

import random

from trainyard.scheduler.cycle import Options
from trainyard.scheduler.model import Node, PendingJob, Queue, ReplicaUse, RunningJob, Status
from trainyard.scheduler.plan import plan as _plan
from trainyard.scheduler.simulate import SimJob, Simulator

GB = 10**9
HOUR = 3600.0
NOW = 2 * HOUR  # every "old" job below was submitted at 0: starved after 30 minutes
STARVE = Options(starve_after=1800.0)  # the rule is off by default


def plan(*args, options=STARVE, **kw):
    return _plan(*args, options=options, **kw)


def node(name, gpus=8, free=None, gpu_type="A100") -> Node:
    return Node(name, 96, 1024 * GB, gpus, gpu_type, free_gpu_ids=free)


def job(id, seq, gpu=1, submitted_at=NOW, **kw) -> PendingJob:
    return PendingJob(id, seq=float(seq), gpu=gpu, memory=GB, submitted_at=submitted_at, **kw)


def busy(aid, node_name, gpus, end, priority=100) -> RunningJob:
    """Work that priority cannot stop, ending at its timeout ``end``."""
    return RunningJob(aid, aid.split("#")[0], priority=priority, replicas=[ReplicaUse(node_name, 1, GB, gpus)],
                      started_at=0.0, expected_end=end, preemptible=False)


def test_a_starved_8_gpu_job_holds_its_node_and_a_small_job_that_would_delay_it_waits():
    # given a node with 2 GPUs free until t=3h, a low-priority 8-GPU job waiting since 0, and a normal
    # 1-GPU job without a timeout that just arrived
    nodes = [node("n0", free=["6", "7"])]
    live = [busy("a#1", "n0", [str(i) for i in range(6)], end=3 * HOUR)]
    pending = [job("small", 1), job("big", 0, gpu=8, priority=0, submitted_at=0.0)]
    # when
    p = plan(nodes, pending, live, now=NOW)
    # then the 8-GPU job holds the node from t=3h and the small job, which could run past that, may not take
    # one of its GPUs; a small job with a timeout that ends before 3h still backfills
    assert [(r.job_id, r.nodes, r.start) for r in p.reservations] == [("big", ["n0"], 3 * HOUR)]
    assert p.entries["big"].status is Status.RESERVED
    assert "small" not in p.admissions
    quick = job("quick", 2, timeout=HOUR / 2)
    assert "quick" in plan(nodes, pending + [quick], live, now=NOW).admissions
    # and without the starvation rule priority lets the small job fragment the node, as before
    p = plan(nodes, pending, live, now=NOW, options=Options(starve_after=None))
    assert "small" in p.admissions


def test_a_starved_job_holds_nodes_besides_the_head_of_the_lines_reservation():
    # given two full nodes, ending at 1h and 2h past now, a starved low-priority job and an urgent one
    nodes = [node("n0", free=[]), node("n1", free=[])]
    live = [busy("a#1", "n0", [str(i) for i in range(8)], end=NOW + HOUR),
            busy("b#1", "n1", [str(i) for i in range(8)], end=NOW + 2 * HOUR)]
    pending = [job("old", 0, gpu=8, priority=0, submitted_at=0.0), job("urgent", 1, gpu=8, priority=300)]
    # when
    p = plan(nodes, pending, live, now=NOW)
    # then each holds a node: the starved one, first in line, the one that frees first
    assert sorted((r.job_id, r.nodes[0]) for r in p.reservations) == [("old", "n0"), ("urgent", "n1")]


def test_the_reservation_moves_when_another_node_frees_first():
    # given a starved job holding n0, which frees at 3h (one GPU of it is free, and held too)
    nodes = [node("n0", free=["7"]), node("n1", free=[])]
    a = busy("a#1", "n0", [str(i) for i in range(7)], end=3 * HOUR)
    b = busy("b#1", "n1", [str(i) for i in range(8)], end=5 * HOUR)
    pending = [job("old", 0, gpu=8, priority=0, submitted_at=0.0)]
    assert [r.nodes for r in plan(nodes, pending, [a, b], now=NOW).reservations] == [["n0"]]
    # when n1's work ends early
    nodes[1].free_gpu_ids = [str(i) for i in range(8)]
    p = plan(nodes, pending + [job("small", 1)], [a], now=NOW + 60)
    # then the job starts there at once, holds nothing, and the small job gets the node it no longer needs
    assert p.admissions["old"][0].node == "n1" and not p.reservations
    assert p.admissions["small"][0].node == "n0"


def test_a_starved_job_of_a_queue_over_its_quota_borrows_before_the_line_takes_the_room():
    # given queue a already at its quota, a starved 8-GPU job of a, and a 1-GPU job of queue b inside its quota
    nodes = [node("n0"), node("n1", free=[])]
    queues = [Queue("a", team="a", gpus={"A100": 8}), Queue("b", team="b")]
    live = [RunningJob("a0#1", "a0", "a", "a", replicas=[ReplicaUse("n1", 1, GB, [str(i) for i in range(8)])],
                       started_at=0.0, expected_end=9 * HOUR, preemptible=False)]
    pending = [job("old", 0, gpu=8, queue="a", team="a", submitted_at=0.0), job("b1", 1, queue="b", team="b")]
    # when
    p = plan(nodes, pending, live, queues, now=NOW)
    # then the starved job borrows the free node now; without the rule b's job takes a GPU of it and the
    # borrower finds 7 in phase 4
    assert p.admissions["old"][0].node == "n0" and "old" in p.borrowed
    p = plan(nodes, pending, live, queues, now=NOW, options=Options(starve_after=None))
    assert "old" not in p.admissions and "b1" in p.admissions


def test_a_job_that_could_never_run_does_not_take_a_starved_place():
    # given one starved place, and the oldest job asking for a GPU type no node has
    nodes = [node("n0", free=["7"])]
    live = [busy("a#1", "n0", [str(i) for i in range(7)], end=3 * HOUR)]
    pending = [job("never", 0, gpu=8, gpu_types=("H100",), submitted_at=0.0),
               job("old", 1, gpu=8, priority=0, submitted_at=60.0), job("small", 2)]
    # when
    p = plan(nodes, pending, live, now=NOW, options=Options(starve_after=1800.0, max_starved=1))
    # then the next oldest one gets it
    assert [r.job_id for r in p.reservations] == ["old"] and "small" not in p.admissions
    assert p.entries["never"].status is Status.IMPOSSIBLE


def test_a_low_priority_8_gpu_job_starts_though_normal_work_keeps_the_node_busy():
    # given one 8-GPU node kept busy by normal-priority 1-GPU jobs arriving every 30-150 s, honest
    # about their timeouts (up to 1.5 h), more than it can run, and a low-priority job that needs the whole
    # node, arriving after 10 minutes (so the jobs that waited longer than it did are younger)
    rng, t, small = random.Random(5), 0.0, []
    while t < 4 * HOUR:
        dur = rng.uniform(600, HOUR)
        small.append(SimJob(job(f"s{len(small)}", len(small) + 1, submitted_at=None, timeout=dur * 1.5), t, dur))
        t += rng.uniform(30, 150)
    big = SimJob(job("big", 0, gpu=8, priority=0, submitted_at=None, timeout=HOUR), 600.0, HOUR)
    for options in (STARVE, Options(starve_after=None)):
        out = Simulator([node("n0")], policy=lambda *a, o=options: plan(*a, options=o)).run(
            [SimJob(s.job, s.submit, s.duration) for s in small] + [big], until=4 * HOUR)
        if options.starve_after is None:
            # then priority alone starves it all day
            assert "big" not in out.started
        else:
            # then, starved after 30 minutes, it waits at most that plus the longest timeout ahead of it
            assert out.started["big"] - 600.0 <= 0.5 * HOUR + 1.5 * HOUR
        big.job.last_preempted_by = None
