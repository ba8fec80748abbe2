"""A job waiting past ``fair_share_wait`` goes first within its priority, but one per team: a backlog older than
the bound went first whole, and took the cluster from every other team for as long as it lasted."""

from functools import partial

from trainyard.scheduler.cycle import Options
from trainyard.scheduler.model import Node, PendingJob
from trainyard.scheduler.plan import plan
from trainyard.scheduler.simulate import SimJob, Simulator

GB, HOUR = 10**9, 3600.0


def waits_of_a_late_team(opt: Options) -> list[float | None]:
    """Team a floods 200 one-hour 1-GPU jobs on 8 GPUs at t=0; team b submits 4 at t=5h: b's waits (h)."""
    nodes = [Node(f"n{i}", 32, 256 * GB, 4, "A100") for i in range(2)]
    flood = [SimJob(PendingJob(f"a{i}", team="a", seq=i, gpu=1, memory=GB), 0.0, HOUR) for i in range(200)]
    few = [SimJob(PendingJob(f"b{i}", team="b", seq=200 + i, gpu=1, memory=GB), 5 * HOUR, HOUR) for i in range(4)]
    out = Simulator(nodes, policy=partial(plan, options=opt)).run(flood + few, until=10 * HOUR)
    return [None if (s := out.started.get(f"b{i}")) is None else round((s - 5 * HOUR) / HOUR, 1) for i in range(4)]


def test_a_backlog_past_the_wait_bound_does_not_take_the_cluster_from_a_lighter_team():
    # the old order ran all of a's overdue backlog first: b's jobs had not started 5 hours later
    assert waits_of_a_late_team(Options()) == waits_of_a_late_team(Options(fair_share_wait=None)) == [0.0] * 4


def test_each_teams_oldest_overdue_job_still_goes_first_within_its_priority():
    from trainyard.scheduler.fairshare import Shares, fair_order
    from trainyard.scheduler.model import Queue

    q = Queue("q")
    jobs = [(PendingJob(f"{t}{i}", team=t, seq=s, gpu=1, submitted_at=s), q)
            for s, (t, i) in enumerate([("a", 0), ("a", 1), ("b", 0), ("a", 2), ("b", 1)])]
    shares = Shares(cpu=64, mem=256, gpus={"A100": 8})
    shares.share.update({"a": 0.9, "b": 0.1})  # b is far behind: it goes first, but for the overdue
    order = [x[0].id for x in fair_order(jobs, shares, [], overdue_before=3) if x is not None]
    assert order[:2] == ["a0", "b0"]  # the oldest overdue of each team, in submit order
    assert order[2:] == ["b1", "a1", "a2"]  # then fair share: b, behind, before a's other overdue job
