"""Priorities, preemption, quotas and borrowing, as a reader would check them by hand."""

from trainyard.scheduler.model import Node, PendingJob, Queue, ReplicaUse, RunningJob
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


def test_a_higher_priority_job_preempts_the_work_that_costs_least():
    # given a full node: an old low-priority job and a young low-priority job, and a non-preemptible one
    nodes = [gpu_node("n", 3, free=[])]
    live = [running("old#1", "n", ["0"], priority=0, started_at=0), running("young#1", "n", ["1"], priority=0, started_at=900),
            running("keep#1", "n", ["2"], priority=0, preemptible=False)]
    # when an urgent 1-GPU job arrives
    p = plan(nodes, [job("urgent", priority=300)], live, now=1000)
    # then only the young one is stopped (least work lost), and the urgent job waits for it
    assert [(x.attempt_id, x.by) for x in p.preemptions] == [("young#1", "urgent")]
    assert "preempted by job urgent" in p.preemptions[0].reason
    assert p.reasons["urgent"].startswith("starting: preempting 1 job (young)")
    assert not p.admissions


def test_equal_or_higher_priority_work_is_never_preempted():
    nodes = [gpu_node("n", 1, free=[])]
    p = plan(nodes, [job("j", priority=100)], [running("same#1", "n", ["0"], priority=100)], now=10)
    assert not p.preemptions and "j" not in p.admissions


def test_stopping_attempts_are_waited_for_not_preempted_again():
    # given the victim of last cycle still stopping
    nodes = [gpu_node("n", 2, free=[])]
    live = [running("v#1", "n", ["0"], priority=0, stopping=True), running("other#1", "n", ["1"], priority=0)]
    # when the preemptor is planned again
    p = plan(nodes, [job("urgent", priority=300)], live, now=10)
    # then it claims the stopping room and preempts nothing more
    assert not p.preemptions
    assert p.reasons["urgent"].startswith("starting: waiting for stopping jobs")


def test_a_job_never_preempts_the_job_that_preempted_it():
    nodes = [gpu_node("n", 1, free=[])]
    live = [running("winner#1", "n", ["0"], priority=0)]
    loser = job("loser", priority=300, last_preempted_by="winner")
    p = plan(nodes, [loser], live, now=10)
    assert not p.preemptions


def test_a_gang_victim_is_stopped_whole_and_frees_all_its_nodes():
    nodes = [gpu_node("a", 1, free=[]), gpu_node("b", 1, free=[])]
    gang = RunningJob("g#1", "g", priority=0, replicas=[ReplicaUse("a", 1, GB, ["0"]), ReplicaUse("b", 1, GB, ["0"])])
    p = plan(nodes, [job("two", replicas=2, priority=200)], [gang], now=5)
    assert [x.attempt_id for x in p.preemptions] == ["g#1"]


def test_quota_binds_and_borrowing_uses_idle_room():
    nodes = [gpu_node("n", 4)]
    capped = [Queue("a", team="a", gpus={"A100": 1}, borrowing=False)]
    p = plan(nodes, [job("a1", 0, queue="a"), job("a2", 1, queue="a")], [], capped)
    assert list(p.admissions) == ["a1"]
    assert "queue quota 1/1 A100 GPUs in use (borrowing off)" in p.reasons["a2"]
    lending = [Queue("a", team="a", gpus={"A100": 1})]
    p = plan(nodes, [job("a1", 0, queue="a"), job("a2", 1, queue="a")], [], lending)
    assert set(p.admissions) == {"a1", "a2"} and p.borrowed == {"a2"}


def test_within_quota_work_goes_before_borrowing_work_of_the_same_priority():
    nodes = [gpu_node("n", 1)]
    queues = [Queue("a", team="a", gpus={"A100": 0}), Queue("b", team="b", gpus={"A100": 1})]
    p = plan(nodes, [job("a-first", 0, queue="a", team="a"), job("b-later", 1, queue="b", team="b")], [], queues)
    assert list(p.admissions) == ["b-later"]


def test_the_lender_takes_its_room_back_from_borrowed_work():
    # given queue a running one job on borrowed room, and queue b, entitled to 1 GPU, with a job waiting
    nodes = [gpu_node("n", 1, free=[])]
    queues = [Queue("a", team="a", gpus={"A100": 0}), Queue("b", team="b", gpus={"A100": 1})]
    live = [running("borrower#1", "n", ["0"], priority=300, queue="a")]
    # when
    p = plan(nodes, [job("mine", queue="b", team="b", priority=0)], live, queues, now=10)
    # then the borrowed work goes first, whatever its priority
    assert [x.attempt_id for x in p.preemptions] == ["borrower#1"]
    assert "needs its quota back" in p.preemptions[0].reason


def test_max_running_is_a_hard_cap():
    p = plan([gpu_node("n", 4)], [job("a", 0, queue="q"), job("b", 1, queue="q")], [], [Queue("q", max_running=1)])
    assert list(p.admissions) == ["a"] and p.reasons["b"] == "queue q runs 1/1 jobs; first in queue q"


def test_fair_share_puts_the_team_holding_less_first():
    # given team big already holds 3 of 4 GPUs, and both teams have a job waiting
    nodes = [gpu_node("n", 4, free=["3"])]
    live = [running(f"b{i}#1", "n", [str(i)], team="big") for i in range(3)]
    jobs = [job("big-next", 0, team="big"), job("small-first", 1, team="small")]
    p = plan(nodes, jobs, live, now=1)
    assert list(p.admissions) == ["small-first"]


def test_inside_a_queue_priority_wins_the_quota():
    # given queue a's 2-GPU quota taken by low-priority work, with room to spare on the node
    nodes = [gpu_node("n", 4, free=["2", "3"])]
    queues = [Queue("a", team="a", gpus={"A100": 2}, borrowing=False)]
    live = [running(f"low{i}#1", "n", [str(i)], priority=0, queue="a", started_at=i) for i in range(2)]
    # when a high-priority job of the same queue arrives
    p = plan(nodes, [job("high", queue="a", team="a", priority=200)], live, queues, now=10)
    # then the cheapest low-priority job of the queue hands its share back
    assert [x.attempt_id for x in p.preemptions] == ["low1#1"]


def test_a_job_that_takes_any_gpu_leaves_scarce_types_to_jobs_that_need_them():
    nodes = [gpu_node("a100", 8, free=["7"]), Node("t4", 32, 256 * GB, 4, "T4")]
    p = plan(nodes, [job("anything", gpu=1), job("only-a100", 1, gpu=1, gpu_types=("A100",))])
    assert p.admissions["anything"][0].node == "t4" and p.admissions["only-a100"][0].node == "a100"


def test_idle_room_beyond_the_quota_starts_a_job_rather_than_a_hold_behind_endless_work():
    # given queue q's quota of A GPUs used by its own low-priority work, an idle A GPU elsewhere, and
    # the only B node's cores taken by work that cannot be preempted and has no timeout
    nodes = [Node("a1", 4, 8 * GB, 1, "A", free_gpu_ids=[], cpu_free=3), Node("a2", 4, 8 * GB, 1, "A"),
             Node("b", 4, 8 * GB, 1, "B", cpu_free=0)]
    queues = [Queue("q", team="t", gpus={"A": 1})]
    live = [running("low#1", "a1", ["0"], priority=0, queue="q", team="t"),
            RunningJob("endless#1", "endless", "q", "t", 0, [ReplicaUse("b", 4, GB, [])], 0.0, preemptible=False)]
    # when a higher-priority job that takes any GPU and may be preempted arrives
    p = plan(nodes, [job("hi", queue="q", team="t", priority=100, preemptible=True)], live, queues, now=10)
    # then it borrows the idle A GPU now: no node held for it on B, whose work may never end
    assert p.admissions["hi"][0].node == "a2" and p.borrowed == {"hi"}
    assert not p.reservations and not p.preemptions


def test_a_cancelled_attempt_counts_against_its_queue_until_it_has_exited():
    # given a queue (a 1-GPU quota, or a cap of 1 running job) whose only job was cancelled and is still stopping
    nodes = [gpu_node("n", 4, free=["1", "2", "3"])]
    live = [running("cancelled#1", "n", ["0"], queue="a", stopping=True)]
    for limit, why in [({"gpus": {"A100": 1}, "borrowing": False}, "queue quota 1/1 A100 GPUs in use (borrowing off)"),
                       ({"max_running": 1}, "queue a runs 1/1 jobs")]:
        # when another job of the queue is planned
        p = plan(nodes, [job("next", queue="a", team="a")], live, [Queue("a", team="a", **limit)], now=10)
        # then it waits for the quota that attempt still holds, though the node has room
        assert not p.admissions and not p.preemptions
        assert p.reasons["next"] == f"{why}; first in queue a"


def test_inside_a_queue_a_preempted_attempt_hands_its_share_to_the_job_it_was_stopped_for():
    # given last cycle's in-queue preemption: its victim still stopping, the preemptor waiting
    nodes = [gpu_node("n", 4, free=["2", "3"])]
    queues = [Queue("a", team="a", gpus={"A100": 2}, borrowing=False)]
    live = [running("low0#1", "n", ["0"], priority=0, queue="a"),
            running("low1#1", "n", ["1"], priority=0, queue="a", started_at=1, stopping=True, preempted=True)]
    # when the preemptor is planned again
    p = plan(nodes, [job("high", queue="a", team="a", priority=200)], live, queues, now=10)
    # then it runs in the share handed back, and stops nothing more
    assert not p.preemptions and list(p.admissions) == ["high"]
