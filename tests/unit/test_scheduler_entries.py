"""Every pending job gets an entry: a typed status and, when it waits, the same message as its reason."""

from trainyard.scheduler.model import Node, PendingJob, Queue, ReplicaUse, RunningJob, Status
from trainyard.scheduler.plan import plan

GB = 10**9


def gpu_node(name, gpus=4, free=None) -> Node:
    return Node(name, 32, 256 * GB, gpus, "A100", free_gpu_ids=free)


def job(id, seq=0, **kw) -> PendingJob:
    kw.setdefault("gpu", 1)
    kw.setdefault("memory", GB)
    return PendingJob(id, seq=seq, **kw)


def running(aid, node, gpus, priority=100, **kw) -> RunningJob:
    return RunningJob(aid, aid.split("#")[0], "default", "default", priority, [ReplicaUse(node, 1, GB, list(gpus))],
                      0.0, **kw)


def statuses(p) -> dict:
    return {jid: e.status for jid, e in p.entries.items()}


def test_admitted_reserved_backfilled_and_waiting_jobs_each_get_their_status():
    # given one node with 2 of 4 GPUs free until a job with a timeout ends
    nodes = [gpu_node("n", 4, free=["0", "1"])]
    live = [running("busy#1", "n", ["2", "3"], expected_end=3600.0)]
    # when a 1-GPU job with a timeout, a 4-GPU job, a short 1-GPU job and a long 1-GPU job queue in that order
    pending = [job("small", 0, timeout=1800), job("big", 1, gpu=4), job("short", 2, timeout=60), job("long", 3)]
    p = plan(nodes, pending, live, now=0)
    # then the first starts, the big one holds the node, the short one backfills and the long one waits
    assert statuses(p) == {"small": Status.ADMITTED, "big": Status.RESERVED, "short": Status.BACKFILLED,
                           "long": Status.NO_ROOM}
    assert p.entries["big"].reservation is p.reservations[0]
    assert all(e.message == p.reasons[jid] for jid, e in p.entries.items() if not e.status.starting)
    assert {jid for jid, e in p.entries.items() if e.status.starting} == set(p.admissions)


def test_preempting_claimed_impossible_backoff_and_yielding():
    nodes = [gpu_node("n", 2, free=[])]
    live = [running("low#1", "n", ["0"], priority=0), running("gone#1", "n", ["1"], priority=0, stopping=True)]
    pending = [job("urgent", 0, priority=300), job("next", 1, priority=300), job("huge", 2, gpu=9),
               job("retry", 3, not_before=60.0), job("low", 4, last_preempted_by="urgent")]
    p = plan(nodes, pending, live, now=10)
    assert statuses(p) == {"urgent": Status.CLAIMED, "next": Status.PREEMPTING, "huge": Status.IMPOSSIBLE,
                           "retry": Status.BACKOFF, "low": Status.YIELDING}
    assert p.entries["next"].victims == ["low"]


def test_over_quota_and_borrowed():
    nodes = [gpu_node("n", 4)]
    queues = [Queue("q", gpus={"A100": 1}), Queue("strict", gpus={"A100": 1}, borrowing=False)]
    pending = [job("a", 0, queue="q"), job("b", 1, queue="q"), job("c", 2, queue="strict"), job("d", 3, queue="strict")]
    p = plan(nodes, pending, [], queues)
    assert statuses(p) == {"a": Status.ADMITTED, "c": Status.ADMITTED, "b": Status.BORROWED,
                           "d": Status.OVER_QUOTA}
    assert p.borrowed == {"b"}
