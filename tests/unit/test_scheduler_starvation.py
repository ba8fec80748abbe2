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


def test_work_that_waited_past_starve_after_is_no_victim_of_priority_once_started():
    # given a low-priority 8-GPU job that waited 2 h before it started a minute ago, and another that waited
    # 10 minutes, each on its own full node
    nodes = [node("n0", free=[]), node("n1", free=[])]
    starved = RunningJob("old#1", "old", priority=0, replicas=[ReplicaUse("n0", 1, GB, [str(i) for i in range(8)])],
                         started_at=NOW - 60, expected_end=NOW + HOUR, submitted_at=NOW - 60 - 2 * HOUR)
    fresh = RunningJob("new#1", "new", priority=0, replicas=[ReplicaUse("n1", 1, GB, [str(i) for i in range(8)])],
                       started_at=NOW - 60, expected_end=NOW + HOUR, submitted_at=NOW - 60 - 600)
    urgent = [job("urgent", 1, gpu=8, priority=300)]
    # when an urgent job needs a whole node
    p = plan(nodes, urgent, [starved, fresh], now=NOW)
    # then it stops the one that did not wait long
    assert [x.attempt_id for x in p.preemptions] == ["new#1"]
    # and with only the starved one to stop, it waits for that one to end
    p = plan(nodes[:1], urgent, [starved], now=NOW)
    assert p.preemptions == [] and "urgent" not in p.admissions
    # without the starvation rule (or not knowing when its job was submitted) it is stopped like any other
    assert [x.attempt_id for x in plan(nodes[:1], urgent, [starved], now=NOW,
                                       options=Options(starve_after=None)).preemptions] == ["old#1"]
    starved.submitted_at = None
    assert [x.attempt_id for x in plan(nodes[:1], urgent, [starved], now=NOW).preemptions] == ["old#1"]


def test_spared_work_of_a_queue_is_not_stopped_to_give_its_quota_back():
    # given queue a (quota 8 GPUs, no borrowing) full with a low-priority job that waited 2 h before it started
    nodes = [node("n0", free=[]), node("n1")]
    queues = [Queue("a", team="a", gpus={"A100": 8}, borrowing=False)]
    live = [RunningJob("old#1", "old", "a", "a", priority=0,
                       replicas=[ReplicaUse("n0", 1, GB, [str(i) for i in range(8)])],
                       started_at=NOW - 60, expected_end=NOW + HOUR, submitted_at=NOW - 60 - 2 * HOUR)]
    # when a normal-priority job of queue a needs its quota
    p = plan(nodes, [job("hi", 1, gpu=8, queue="a", team="a", submitted_at=NOW)], live, queues, now=NOW)
    # then it waits for the quota rather than stopping it; without the rule it stops it
    assert p.preemptions == [] and "hi" not in p.admissions
    p = plan(nodes, [job("hi", 1, gpu=8, queue="a", team="a", submitted_at=NOW)], live, queues, now=NOW,
             options=Options(starve_after=None))
    assert [x.attempt_id for x in p.preemptions] == ["old#1"]


def test_a_long_waiting_gang_of_a_queue_over_its_quota_holds_nodes_when_nobody_inside_a_quota_does():
    # given queue a with a quota of 0 (all it runs is borrowed), queue b with room to spare in its own, two
    # nodes each with 1 GPU taken until 1h and 2h past now, and a 2 × 8-GPU gang of queue a that has waited 2 h
    nodes = [node("n0", free=[str(i) for i in range(1, 8)]), node("n1", free=[str(i) for i in range(1, 8)])]
    queues = [Queue("a", team="a", gpus={"A100": 0}), Queue("b", team="b", gpus={"A100": 16})]
    live = [busy("x#1", "n0", ["0"], end=NOW + HOUR), busy("y#1", "n1", ["0"], end=NOW + 2 * HOUR)]
    gang = job("gang", 0, gpu=8, replicas=2, queue="a", team="a", submitted_at=0.0)
    small = job("small", 1, queue="a", team="a", submitted_at=NOW, gpu_types=("A100",))
    # the starvation rule would put it first in line: test phase 4 alone (the rule is off by default)
    off = Options(starve_after=None, reserve_borrowing_after=3600.0)
    # when
    p = plan(nodes, [gang, small], live, queues, now=NOW, options=off)
    # then it holds both nodes from when the last frees, and the small borrower that could outlast that waits
    assert [(r.job_id, sorted(r.nodes), r.start) for r in p.reservations] == [("gang", ["n0", "n1"], NOW + 2 * HOUR)]
    assert p.entries["gang"].status is Status.RESERVED and "small" not in p.admissions
    # but not when it has waited under the threshold, or the rule is off
    young = job("gang", 0, gpu=8, replicas=2, queue="a", team="a", submitted_at=NOW - 600)
    assert not plan(nodes, [young, small], live, queues, now=NOW, options=off).reservations
    never = Options(starve_after=None)
    assert not plan(nodes, [gang, small], live, queues, now=NOW, options=never).reservations
    # nor when a job inside its quota is blocked and holds nodes of its type: the room is its owner's
    owner = job("owner", 2, gpu=8, queue="b", team="b", submitted_at=NOW)
    p = plan(nodes, [gang, small, owner], live, queues, now=NOW, options=off)
    assert [r.job_id for r in p.reservations] == ["owner"]
    # but an owner blocked on another type leaves it free to
    nodes.append(node("h0", free=[], gpu_type="H100"))
    live.append(busy("z#1", "h0", [str(i) for i in range(8)], end=NOW + HOUR))
    owner.gpu_types = ("H100",)
    p = plan(nodes, [gang, small, owner], live, queues, now=NOW, options=off)
    assert sorted(r.job_id for r in p.reservations) == ["gang", "owner"]
