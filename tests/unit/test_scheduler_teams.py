"""A quota is a guarantee (Kueue's rule): priority stops another team's work only where no quota guarantees it."""

from trainyard.scheduler.model import Node, PendingJob, Queue, ReplicaUse, RunningJob
from trainyard.scheduler.plan import plan

GB = 10**9


def node(name, gpus=2, free=()) -> Node:
    return Node(name, 32, 256 * GB, gpus, "A100", free_gpu_ids=list(free))


def job(id, queue, team, priority=300, seq=0, **kw) -> PendingJob:
    return PendingJob(id, queue=queue, team=team, priority=priority, seq=seq, gpu=1, memory=GB, **kw)


def running(aid, node, gpu, queue, team, priority=0, started_at=0.0) -> RunningJob:
    return RunningJob(aid, aid.split("#")[0], queue, team, priority, [ReplicaUse(node, 1, GB, [gpu])], started_at)


def stopped(p) -> list[tuple[str, str]]:
    return [(x.attempt_id, x.by) for x in p.preemptions]


QUEUES = [Queue("vision", team="vision", gpus={"A100": 2}), Queue("vision-2", team="vision", gpus={"A100": 2}),
          Queue("nlp", team="nlp", gpus={"A100": 2})]


def test_priority_does_not_stop_another_teams_work_inside_its_quota():
    # given nlp's low-priority work running inside nlp's quota on the only node
    live = [running("nlp-low#1", "n", "0", "nlp", "nlp"), running("nlp-low2#1", "n", "1", "nlp", "nlp", started_at=5)]
    # when a vision member's urgent job, inside vision's quota, finds no room
    p = plan([node("n")], [job("urgent", "vision", "vision")], live, QUEUES, now=10)
    # then nlp keeps what its quota guarantees, and the urgent job waits
    assert not p.preemptions and not p.admissions


def test_priority_stops_its_own_teams_work_in_any_of_the_teams_queues():
    # given vision's low-priority work in one queue, and nlp's (younger: cheaper to stop) in its own
    live = [running("vision-low#1", "n", "0", "vision", "vision"),
            running("nlp-low#1", "n", "1", "nlp", "nlp", started_at=5)]
    # when an urgent job of vision's other queue finds no room
    p = plan([node("n")], [job("urgent", "vision-2", "vision")], live, QUEUES, now=10)
    # then it stops its own team's work, not nlp's
    assert stopped(p) == [("vision-low#1", "urgent")]


def test_priority_stops_another_teams_borrowed_work():
    # given nlp running three jobs on a 2-GPU quota: the youngest one runs on borrowed room
    live = [running(f"nlp{i}#1", n, g, "nlp", "nlp", started_at=i) for i, (n, g) in enumerate(
        [("a", "0"), ("a", "1"), ("b", "0")])] + [running("vision-low#1", "b", "1", "vision", "vision")]
    # when vision's urgent job finds no room
    p = plan([node("a"), node("b")], [job("urgent", "vision-2", "vision")], live, QUEUES, now=10)
    # then nlp's borrowed job goes (borrowed first), never its guaranteed ones
    assert stopped(p) == [("nlp2#1", "urgent")]


def test_a_job_of_the_default_queue_is_of_its_submitters_team():
    # given two one-GPU nodes full of vision's low-priority work inside its quota
    live = [running("vision-low#1", "a", "0", "vision", "vision"), running("v2#1", "b", "0", "vision", "vision")]
    queues = [*QUEUES, Queue("default", team="default", gpus={"A100": 4})]
    # when an nlp member and then a vision member each submit an urgent job of one shape to the default queue
    jobs = [job("nlp-urgent", "default", "nlp"), job("vision-urgent", "default", "vision", seq=1)]
    p = plan([node("a", 1), node("b", 1)], jobs, live, queues, now=10)
    # then nlp's waits (holding a node), and vision's stops its own team's work on the other: the first one's
    # fate is not the second's
    assert [by for _, by in stopped(p)] == ["vision-urgent"]


def test_a_failed_search_of_one_team_does_not_answer_for_another():
    # given two one-GPU nodes full of vision's low-priority work inside its quota
    live = [running("vision-low#1", "a", "0", "vision", "vision"), running("v2#1", "b", "0", "vision", "vision")]
    # when nlp's urgent job goes first (its team holds less), then vision's own of the same shape and priority
    jobs = [job("nlp-urgent", "nlp", "nlp"), job("vision-urgent", "vision-2", "vision", seq=1)]
    p = plan([node("a", 1), node("b", 1)], jobs, live, QUEUES, now=10)
    # then nlp's waits (holding a node), and vision's, searching for itself, stops its own team's work
    assert [by for _, by in stopped(p)] == ["vision-urgent"]


def test_work_of_a_queue_without_a_quota_is_borrowed_once_some_queue_has_one():
    # given the default queue (no quota) running high-priority work on the only node
    live = [running("free#1", "n", "0", "default", "default", priority=300),
            running("free2#1", "n", "1", "default", "default", priority=300)]
    queues = [*QUEUES, Queue("default", team="default")]
    # when nlp, inside its quota, needs a GPU for low-priority work
    p = plan([node("n")], [job("mine", "nlp", "nlp", priority=0)], live, queues, now=10)
    # then it takes its room back from the default queue, whatever that work's priority
    assert len(p.preemptions) == 1 and p.preemptions[0].by == "mine"
    assert "needs its quota back" in p.preemptions[0].reason


def test_a_job_of_a_queue_without_a_quota_stops_only_its_own_queues_work():
    # given nlp's work on borrowed room (its quota is 0), vision's inside its quota, and the default
    # queue's own low-priority work
    queues = [Queue("nlp", team="nlp", gpus={"A100": 0}), Queue("vision", team="vision", gpus={"A100": 1}),
              Queue("default", team="default")]
    live = [running("nlp-borrowed#1", "n", "0", "nlp", "nlp", started_at=9),
            running("vision-low#1", "n", "1", "vision", "vision", started_at=8)]
    # when an urgent job of the default queue finds no room: it reclaims nothing and stops no other queue's work
    p = plan([node("n")], [job("urgent", "default", "default")], live, queues, now=10)
    assert not p.preemptions
    # and with low-priority work of its own queue there, it stops that
    live.append(running("default-low#1", "m", "0", "default", "default"))
    p = plan([node("n"), node("m", 1)], [job("urgent", "default", "default")], live, queues, now=10)
    assert stopped(p) == [("default-low#1", "urgent")]


def test_with_no_quota_anywhere_priority_stops_any_teams_work():
    live = [running("nlp-low#1", "n", "0", "nlp", "nlp", started_at=5), running("v#1", "n", "1", "vision", "vision")]
    unlimited = [Queue("vision", team="vision"), Queue("nlp", team="nlp")]
    p = plan([node("n")], [job("urgent", "vision", "vision")], live, unlimited, now=10)
    assert stopped(p) == [("nlp-low#1", "urgent")]


def test_a_job_of_a_queue_without_a_quota_borrows_after_the_jobs_inside_their_quotas():
    # given one free GPU, and queues with quotas beside the default queue
    queues = [*QUEUES, Queue("default", team="default")]
    jobs = [job("free", "default", "default", priority=300), job("mine", "nlp", "nlp", priority=0, seq=1)]
    # when an urgent job of the default queue and a low-priority one inside nlp's quota both want it
    p = plan([node("n", 1, free=["0"])], jobs, [], queues, now=10)
    # then nlp's takes it: the default queue's would only borrow it, to have it taken back next cycle
    assert list(p.admissions) == ["mine"] and not p.preemptions
    # and alone, the default queue's job borrows idle room
    p = plan([node("n", 1, free=["0"])], jobs[:1], [], queues, now=10)
    assert list(p.admissions) == ["free"] and p.borrowed == {"free"}
