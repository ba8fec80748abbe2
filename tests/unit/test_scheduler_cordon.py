"""Cordoned nodes in the planner: nothing placed or preempted there, their work still counted."""

from trainyard.scheduler.model import Node, PendingJob, Queue, ReplicaUse, RunningJob
from trainyard.scheduler.plan import plan

GB = 10**9


def gpu_node(name, gpu_type="A100", gpus=4, free=None, cordoned=False) -> Node:
    return Node(name, 32, 256 * GB, gpus, gpu_type, free_gpu_ids=free, cordoned=cordoned)


def job(id, **kw) -> PendingJob:
    kw.setdefault("gpu", 1)
    kw.setdefault("memory", GB)
    return PendingJob(id, **kw)


def running(aid, node, gpus, priority=100, queue="default", **kw) -> RunningJob:
    return RunningJob(aid, aid.split("#")[0], queue, queue, priority, [ReplicaUse(node, 1, GB, list(gpus))], 0.0, **kw)


def test_work_goes_only_to_nodes_in_service():
    nodes = [gpu_node("a", cordoned=True), gpu_node("b", gpus=2)]
    p = plan(nodes, [job(f"j{i}") for i in range(4)], [], now=10)
    assert sorted(p.admissions) == ["j0", "j1"]
    assert {pl.node for places in p.admissions.values() for pl in places} == {"b"}
    assert "j2" in p.reasons and "j3" in p.reasons


def test_a_job_only_a_cordoned_node_can_run_waits_for_it_by_name():
    nodes = [gpu_node("a100-1", cordoned=True), gpu_node("a100-2", cordoned=True), gpu_node("h100-1", "H100")]
    p = plan(nodes, [job("wants-a100", gpu_types=("A100",)), job("any")], [], now=10)
    assert list(p.admissions) == ["any"]
    assert p.reasons["wants-a100"] == "waits for cordoned nodes a100-1, a100-2: no node in service can run it"
    # and one no node could ever run is still told so
    p = plan(nodes, [job("wants-v100", gpu_types=("V100",))], [], now=10)
    assert p.reasons["wants-v100"].startswith("no node can run it: no node has GPU type V100")


def test_nothing_is_preempted_to_make_room_on_a_cordoned_node():
    nodes = [gpu_node("a", gpus=1, free=[], cordoned=True), gpu_node("b", gpus=1, free=[])]
    live = [running("low-a#1", "a", ["0"], priority=0), running("keep-b#1", "b", ["0"], priority=0,
                                                                 preemptible=False)]
    p = plan(nodes, [job("urgent", priority=300)], live, now=10)
    assert not p.preemptions and not p.admissions
    # with the node back in service, the same cycle preempts there
    nodes[0].cordoned = False
    p = plan(nodes, [job("urgent", priority=300)], live, now=10)
    assert [x.attempt_id for x in p.preemptions] == ["low-a#1"]


def test_work_on_a_cordoned_node_still_counts_against_its_queues_quota_by_gpu_type():
    nodes = [gpu_node("a", gpus=1, free=[], cordoned=True), gpu_node("b")]
    queues = [Queue("q", gpus={"A100": 1}, borrowing=False)]
    live = [running("old#1", "a", ["0"], queue="q")]
    p = plan(nodes, [job("next", queue="q")], live, queues, now=10)
    assert not p.admissions and "quota" in p.reasons["next"]
