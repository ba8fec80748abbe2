"""A preemption search that cannot succeed is never run: the bound on what a job may stop counts only the work
the search itself may stop (one rule for both), so a huge gang facing old work costs no O(replicas × nodes) search."""

import pytest

from trainyard.scheduler.model import Node, PendingJob, Queue, ReplicaUse, RunningJob
from trainyard.scheduler.plan import Options, plan

GB = 2**30
NOW = 100_000.0
HOUR = 3600.0


def busy(n: int, queue: str = "default", **victim) -> tuple[list[Node], list[RunningJob]]:
    """``n`` nodes of 64 cores, 48 of them taken by 12 attempts (of ``queue``) of 4 cores that started an hour
    ago and have a timeout (priority may not stop them: Options.preempt_within), the last of them on node 0
    made as ``victim`` says."""
    nodes, live = [], []
    for i in range(n):
        nodes.append(Node(f"n{i}", 64, 256 * GB, cpu_free=16, memory_free=256 * GB - 48 * GB))
        for k in range(12):
            kw = dict(attempt_id=f"w{i}-{k}#1", job_id=f"w{i}-{k}", queue=queue, team=queue, priority=100,
                      replicas=[ReplicaUse(f"n{i}", 4, 4 * GB)], started_at=NOW - HOUR - k,
                      expected_end=NOW + HOUR, submitted_at=NOW - HOUR - 100)
            if i == 0 and k == 11:
                kw.update(victim)
            live.append(RunningJob(**kw))
    return nodes, live


def gang(replicas: int, **kw) -> PendingJob:
    kw.setdefault("submitted_at", NOW - 600)
    return PendingJob("gang", priority=200, replicas=replicas, cpu=1, memory=GB, **kw)


def test_a_gang_that_only_old_work_could_make_room_for_is_ruled_out_without_a_search():
    # given a busy cluster of 200 nodes of old work with a timeout, which priority may not stop
    nodes, live = busy(200)
    # when a higher-priority gang of 10,000 replicas waits (all that runs, stopped, would make room for it)
    p = plan(nodes, [gang(10_000)], live, now=NOW)
    # then it is not admitted, nothing is stopped, and no search was run: the bound said it could not succeed
    assert "gang" not in p.admissions and not p.preemptions
    assert (p.preempt_searches, p.preempt_ruled_out) == (0, 1)


# one attempt on node 0 that the search may stop: then the bound must count it, and the search run
@pytest.mark.parametrize("victim, job, options", [
    ({"started_at": NOW - 60}, {}, Options()),  # started within preempt_within
    ({"expected_end": None}, {"submitted_at": NOW - 5 * HOUR}, Options()),  # no timeout, and the gang waited 4 h
])
def test_work_the_gang_may_stop_is_counted_and_stopped(victim, job, options):
    nodes, live = busy(20, **victim)
    # a gang that fits in the free room and that one attempt's 4 cores
    p = plan(nodes, [gang(20 * 16 + 4, **job)], live, now=NOW, options=options)
    assert [x.attempt_id for x in p.preemptions] == ["w0-11#1"] and p.preempt_searches == 1


@pytest.mark.parametrize("victim, job, options, queues", [
    ({"expected_end": None}, {}, Options(), ()),  # no timeout, but the gang has not waited 4 h
    ({"started_at": NOW - 60, "submitted_at": NOW - 3 * HOUR}, {}, Options(starve_after=HOUR), ()),  # it starved
    ({"started_at": NOW - 60}, {"queue": "vision", "team": "vision"}, Options(),
     [Queue("nlp", team="nlp", cpu=1000), Queue("vision", team="vision", cpu=1000)]),  # inside nlp's quota
])
def test_work_the_gang_may_not_stop_is_not_counted(victim, job, options, queues):
    nodes, live = busy(20, queues[0].name if queues else "default", **victim)
    p = plan(nodes, [gang(20 * 16 + 4, **job)], live, queues, now=NOW, options=options)
    assert not p.preemptions and (p.preempt_searches, p.preempt_ruled_out) == (0, 1)
