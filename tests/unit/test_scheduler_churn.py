"""Preemption that does not churn: each stop is needed, bounded in the work it throws away, and pays off."""

from trainyard.scheduler.cycle import Options
from trainyard.scheduler.model import Node, PendingJob, Queue, ReplicaUse, RunningJob, Status
from trainyard.scheduler.plan import plan

GB = 10**9


def gpu_node(name, gpus=4, free=None) -> Node:
    return Node(name, 32, 256 * GB, gpus, "A100", free_gpu_ids=free)


def job(id, seq=0, **kw) -> PendingJob:
    kw.setdefault("gpu", 1)
    kw.setdefault("memory", GB)
    return PendingJob(id, seq=seq, **kw)


def running(aid, node, gpus, priority=100, started_at=0.0, queue="default", **kw) -> RunningJob:
    return RunningJob(aid, aid.split("#")[0], queue, kw.pop("team", queue), priority,
                      [ReplicaUse(node, 1, GB, list(gpus))], started_at, **kw)


def test_a_borrowing_queue_stops_only_its_own_lower_priority_work_and_only_for_room():
    # given queue a (quota 1 GPU, may borrow) running two low-priority jobs, and queue b two younger ones,
    # on a full node
    nodes = [gpu_node("n", 4, free=[])]
    queues = [Queue("a", team="a", gpus={"A100": 1}), Queue("b", team="b")]
    live = [running("a-old#1", "n", ["0"], priority=0, started_at=100, queue="a"),
            running("a-new#1", "n", ["1"], priority=0, started_at=200, queue="a"),
            running("b-0#1", "n", ["2"], priority=0, started_at=300, queue="b"),
            running("b-1#1", "n", ["3"], priority=0, started_at=300, queue="b")]
    # when a normal-priority job of queue a needs one GPU
    p = plan(nodes, [job("high", queue="a", team="a", priority=100)], live, queues, now=400)
    # then it takes the room of one job of its own queue (the one that ran least), not queue b's cheaper work,
    # and does not stop its queue's other job to get back inside the quota
    assert [x.attempt_id for x in p.preemptions] == ["a-new#1"]
    assert p.entries["high"].status is Status.PREEMPTING


def test_a_borrowing_queue_does_not_stop_its_work_when_that_would_not_give_the_room():
    # given queue a's low-priority job on a node too small for the waiting gang even once it is stopped
    nodes = [gpu_node("n", 2, free=[])]
    queues = [Queue("a", team="a", gpus={"A100": 1})]
    live = [running("low#1", "n", ["0"], priority=0, queue="a"), running("other#1", "n", ["1"], priority=100)]
    # when a normal-priority job of queue a needs both GPUs
    p = plan(nodes, [job("big", queue="a", team="a", priority=100, gpu=2)], live, queues, now=10)
    # then nothing is stopped: the room freed would not admit it
    assert p.preemptions == [] and "big" not in p.admissions


def test_priority_never_throws_away_more_than_the_cap_of_an_attempts_run():
    nodes = [gpu_node("n", 1, free=[])]
    live = [running("low#1", "n", ["0"], priority=0, started_at=0, expected_end=7200)]
    # an hour in: past the default cap of five minutes, the urgent job waits for it to end
    late = plan(nodes, [job("urgent", priority=300)], live, now=3600)
    assert late.preemptions == [] and late.entries["urgent"].status is not Status.PREEMPTING
    # four minutes in, or with no cap, it is stopped
    assert [x.attempt_id for x in plan(nodes, [job("urgent", priority=300)], live, now=240).preemptions] == ["low#1"]
    uncapped = plan(nodes, [job("urgent", priority=300)], live, now=3600, options=Options(preempt_within=None))
    assert [x.attempt_id for x in uncapped.preemptions] == ["low#1"]


def test_a_lender_reclaims_young_borrowed_work_at_once_and_old_only_once_it_has_waited_reclaim_after():
    nodes = [gpu_node("n", 1, free=[])]
    queues = [Queue("a", team="a", gpus={"A100": 0}), Queue("b", team="b", gpus={"A100": 1})]
    young = [running("borrower#1", "n", ["0"], priority=300, queue="a", started_at=10 * 3600 - 240)]
    old = [running("borrower#1", "n", ["0"], priority=300, queue="a", started_at=0)]

    def mine(waited: float, live, **opt):
        p = plan(nodes, [job("mine", queue="b", team="b", priority=0, submitted_at=10 * 3600 - waited)], live,
                 queues, now=10 * 3600, options=Options(**opt))
        return [x.attempt_id for x in p.preemptions]
    # four minutes in (within reclaim_within, 5 min), borrowed work of any priority is taken back at once
    assert mine(0, young) == ["borrower#1"]
    # ten hours in, it is left to end while the lender's job has waited less than reclaim_after (1 h) ...
    assert mine(3500, old) == []
    # ... and taken back once it has waited longer, timeout or none
    assert mine(3700, old) == ["borrower#1"]
    # with both off, at once whatever its age (Kueue's reclaimWithinCohort: Any)
    assert mine(0, old, reclaim_within=None, reclaim_after=None) == ["borrower#1"]


def test_a_lender_waiting_on_old_borrowed_work_is_told_when_it_takes_the_room_back():
    # given a lender's job whose one GPU is held by another team's borrowed job ten hours from its end
    nodes = [gpu_node("n", 1, free=[])]
    queues = [Queue("a", team="a", gpus={"A100": 0}), Queue("b", team="b", gpus={"A100": 1})]
    old = [running("borrower#1", "n", ["0"], queue="a", started_at=0, expected_end=20 * 3600)]
    mine = [job("mine", queue="b", team="b", submitted_at=10 * 3600 - 120)]
    # then its reason says the held node's end, and that its queue takes the room back sooner
    msg = plan(nodes, mine, old, queues, now=10 * 3600).entries["mine"].message
    assert "next to start in ≤ 10h00m" in msg and "its queue takes that room back in 58m" in msg, msg
    # not with reclaim_after off, nor where the work in its way is not borrowed (its own queue's, no quota)
    off = plan(nodes, mine, old, queues, now=10 * 3600, options=Options(reclaim_after=None)).entries["mine"].message
    assert "takes that room back" not in off and "next to start in ≤ 10h00m" in off, off
    own = [running("own#1", "n", ["0"], queue="b", team="b", started_at=0, expected_end=20 * 3600, priority=300)]
    assert "takes that room back" not in plan(nodes, mine, own, queues, now=10 * 3600).entries["mine"].message


def test_with_reclaim_after_off_a_lender_waits_for_old_borrowed_work_with_a_timeout_to_end():
    nodes = [gpu_node("n", 2, free=[])]
    queues = [Queue("a", team="a", gpus={"A100": 0}), Queue("b", team="b", gpus={"A100": 2})]
    opt = Options(reclaim_within=300, reclaim_after=None)
    old = running("old#1", "n", ["0"], queue="a", started_at=0, expected_end=4 * 3600)
    young = running("young#1", "n", ["1"], queue="a", started_at=3500, expected_end=4 * 3600)
    untimed = running("untimed#1", "n", ["1"], queue="a", started_at=0)
    mine = [job("mine", queue="b", team="b", submitted_at=0)]
    # an hour in, the old borrowed job is left to end; the one started four minutes ago is reclaimed
    p = plan(nodes, mine, [old, young], queues, now=3740, options=opt)
    assert [x.attempt_id for x in p.preemptions] == ["young#1"]
    # and with only old work, the lender waits for it, unless that work has no timeout to end by
    p = plan(nodes, [job("mine", queue="b", team="b", gpu=2, submitted_at=0)], [old, young], queues, now=3740,
             options=opt)
    assert p.preemptions == [] and "mine" not in p.admissions
    p = plan(nodes, mine, [old, untimed], queues, now=3740, options=opt)
    assert [x.attempt_id for x in p.preemptions] == ["untimed#1"]


def test_a_lender_takes_back_the_borrowed_work_that_loses_least_whatever_its_priority():
    # given two borrowed jobs of other teams: one of priority 0 ten minutes in, one of priority 300 a minute in
    nodes = [gpu_node("n", 2, free=[])]
    queues = [Queue("a", team="a", gpus={"A100": 0}), Queue("c", team="c", gpus={"A100": 0}),
              Queue("b", team="b", gpus={"A100": 2})]
    live = [running("low-old#1", "n", ["0"], priority=0, queue="a", started_at=3000),
            running("high-young#1", "n", ["1"], priority=300, queue="c", started_at=3540)]
    # when the lender wants one GPU back (reclaim_within off, so both are its victims)
    p = plan(nodes, [job("mine", queue="b", team="b", submitted_at=3600)], live, queues, now=3600,
             options=Options(reclaim_within=None))
    # then it stops the one that ran least: another team's priority ranks only that team's work
    assert [x.attempt_id for x in p.preemptions] == ["high-young#1"]


def test_the_job_owed_room_by_its_preemption_goes_first():
    # given the job 'owed' stopped 'victim' last cycle, so one GPU is free, and team 'light' holding less
    # than team 'heavy' has a job that came earlier: fair share alone would put it first
    nodes = [gpu_node("n", 4, free=["3"])]
    live = [running(f"h{i}#1", "n", [str(i)], team="heavy") for i in range(3)]
    pending = [job("light-first", 0, team="light"), job("owed", 1, team="heavy"),
               job("victim", 2, team="heavy", priority=0, last_preempted_by="owed")]
    # when the cycle runs
    p = plan(nodes, pending, live, now=10)
    # then the room goes to the job it was freed for, and its victim still yields to it
    assert list(p.admissions) == ["owed"]
    assert p.entries["victim"].status is Status.YIELDING
    assert "light-first" not in p.admissions


def test_a_victim_does_not_yield_to_a_preemptor_waiting_out_a_retry_backoff():
    # the preemptor failed at once and waits out a backoff of years: its victim held back all that time, on an
    # idle node, and a member could so keep another team's job off the cluster
    nodes = [gpu_node("n", 4, free=["0", "1", "2", "3"])]
    pending = [job("preemptor", 0, priority=300, not_before=10 + 3650 * 86400.0),
               job("victim", 1, team="other", priority=0, last_preempted_by="preemptor")]
    p = plan(nodes, pending, [], now=10)
    assert list(p.admissions) == ["victim"] and p.entries["preemptor"].status is Status.BACKOFF


def test_old_work_without_a_timeout_is_preempted_once_the_job_has_waited_out_stop_untimed_after():
    # its end is unknown, so sparing it for good could keep the urgent job waiting for ever; stopping it
    # as soon as the cap on preemption throws hours away (the default bound is 4 h)
    nodes = [gpu_node("n", 1, free=[])]
    live = [running("forever#1", "n", ["0"], priority=0, started_at=0, expected_end=None)]
    now = 10 * 3600
    fresh = plan(nodes, [job("urgent", priority=300, submitted_at=now - 3600)], live, now=now)
    assert fresh.preemptions == []
    waited = plan(nodes, [job("urgent", priority=300, submitted_at=now - 4 * 3600 - 1)], live, now=now)
    assert [x.attempt_id for x in waited.preemptions] == ["forever#1"]


def test_a_job_that_waited_past_reclaim_after_is_not_turned_away_for_a_younger_one_like_it():
    # given two jobs alike of a lender's queue, the younger first in line (it was submitted first, then
    # requeued), and old borrowed work of another team on the one GPU
    nodes = [gpu_node("n", 1, free=[])]
    queues = [Queue("a", team="a", gpus={"A100": 0}), Queue("b", team="b", gpus={"A100": 1})]
    old = [running("borrower#1", "n", ["0"], queue="a", started_at=0)]
    line = [job("young", 0, queue="b", team="b", submitted_at=10 * 3600 - 60),
            job("waited", 1, queue="b", team="b", submitted_at=10 * 3600 - 7200)]
    # when a cycle holding no nodes for anyone runs (so the young one is turned away, not given a reservation):
    # the young one may not stop hours-old borrowed work, the one waiting 2 h may
    p = plan(nodes, line, old, queues, now=10 * 3600, options=Options(max_reservations=0))
    # then the older one reclaims the GPU, not turned away for the younger one's answer
    assert [(x.attempt_id, x.by) for x in p.preemptions] == [("borrower#1", "waited")], p.preemptions

