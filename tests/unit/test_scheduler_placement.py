"""Placement on heterogeneous nodes: types, selectors, best fit, spread, gangs, reasons."""

from trainyard.scheduler.model import Node, PendingJob, Queue, ReplicaUse, RunningJob
from trainyard.scheduler.plan import plan

GB = 10**9


def node(name, cpu=8, memory=64 * GB, gpus=0, gpu_type=None, **kw) -> Node:
    return Node(name, cpu, memory, gpus, gpu_type, **kw)


def job(id, seq=0, **kw) -> PendingJob:
    kw.setdefault("memory", GB)
    return PendingJob(id, seq=seq, **kw)


def test_the_issue_cluster_places_all_six_jobs_at_once():
    # given A × 2 (8 cores, 50 GB, 2 × RTX 2080 Ti) and B × 3 (4 cores, 20 GB, 1 × GTX 1080)
    nodes = [node(f"A{i}", 8, 50 * GB, 2, "RTX 2080 Ti") for i in (1, 2)]
    nodes += [node(f"B{i}", 4, 20 * GB, 1, "GTX 1080") for i in (1, 2, 3)]
    jobs = [job(f"X{i}", i, cpu=4, memory=20 * GB) for i in range(4)]
    jobs += [job("Y", 4, cpu=2, memory=20 * GB, gpu=1, gpu_types=("RTX 2080 Ti",)), job("Z", 5, cpu=4, memory=30 * GB)]
    # when
    p = plan(nodes, jobs)
    # then every job starts, Y on a 2080 Ti, Z on an A node (only those have 30 GB)
    assert set(p.admissions) == {"X0", "X1", "X2", "X3", "Y", "Z"}
    assert p.admissions["Y"][0].node.startswith("A") and len(p.admissions["Y"][0].gpu_ids) == 1
    assert p.admissions["Z"][0].node.startswith("A")
    assert not p.reasons


def test_gpu_type_list_is_a_preference_order():
    nodes = [node("t4", gpus=4, gpu_type="T4"), node("a100", gpus=1, gpu_type="A100")]
    p = plan(nodes, [job("a", 0, gpu=1, gpu_types=("A100", "T4")), job("b", 1, gpu=1, gpu_types=("A100", "T4"))])
    assert p.admissions["a"][0].node == "a100"
    assert p.admissions["b"][0].node == "t4"


def test_node_selector_is_honoured():
    nodes = [node("plain"), node("fast", labels={"disk": "nvme"})]
    p = plan(nodes, [job("a", cpu=1, node_selector={"disk": "nvme"})])
    assert p.admissions["a"][0].node == "fast"


def test_gpu_jobs_pack_best_fit_and_keep_a_whole_node_for_a_big_job():
    # given one node with 2 of 8 GPUs free and one empty node
    nodes = [node("busy", 64, gpus=8, gpu_type="A100", free_gpu_ids=["6", "7"]), node("empty", 64, gpus=8, gpu_type="A100")]
    # when two 1-GPU jobs and then an 8-GPU job arrive
    p = plan(nodes, [job("s1", 0, gpu=1), job("s2", 1, gpu=1), job("big", 2, gpu=8)])
    # then the small ones fill the busy node and the big one gets the empty node whole
    assert p.admissions["s1"][0].node == p.admissions["s2"][0].node == "busy"
    assert p.admissions["big"][0].node == "empty" and len(p.admissions["big"][0].gpu_ids) == 8


def test_cpu_jobs_prefer_nodes_without_gpus():
    nodes = [node("gpu", 32, gpus=4, gpu_type="T4"), node("cpu", 32)]
    p = plan(nodes, [job("c", cpu=4)])
    assert p.admissions["c"][0].node == "cpu"


def test_spread_puts_each_replica_on_its_own_node_and_pack_shares():
    nodes = [node(f"n{i}", 16, gpus=4, gpu_type="A100") for i in range(3)]
    p = plan(nodes, [job("s", 0, replicas=3, gpu=1, placement="spread"), job("p", 1, replicas=3, gpu=1)])
    assert len({a.node for a in p.admissions["s"]}) == 3
    assert len({a.node for a in p.admissions["p"]}) == 1


def test_a_gang_starts_whole_or_not_at_all_with_a_reason():
    # given 3 of 4 T4s free, the last held by work without a timeout
    nodes = [node("a", 8, gpus=2, gpu_type="T4"), node("b", 8, gpus=2, gpu_type="T4", free_gpu_ids=["1"])]
    held = [RunningJob("r#1", "r", replicas=[ReplicaUse("b", 1, GB, ["0"])], preemptible=False)]
    gangs = [job("g1", 0, replicas=4, gpu=1, gpu_types=("T4",)), job("g2", 1, replicas=4, gpu=1, gpu_types=("T4",))]
    # when
    p = plan(nodes, gangs + [job("small", 2, cpu=1)], held)
    # then neither gang holds part of the room; the first is next to start, the second says what it needs
    assert list(p.admissions) == ["small"]
    assert "next to start: 2 nodes held for it" in p.reasons["g1"]
    assert p.reasons["g2"].startswith("4 replicas at once (pack), each needs 1 × T4, 2 free on any node, 3 in all")
    assert plan(nodes[:1], [job("g", replicas=3, gpu=1)]).reasons["g"] == (
        "no node can run it: 3 replicas need room the cluster does not have (at most 2 fit)")


def test_a_gang_of_one_type_never_mixes_types():
    nodes = [node("t4", gpus=2, gpu_type="T4"), node("a100", gpus=2, gpu_type="A100")]
    p = plan(nodes, [job("g", replicas=2, gpu=2, gpu_types=("A100", "T4"))])
    assert "g" not in p.admissions


def test_reason_names_what_is_missing_who_is_ahead_and_the_quota():
    # given a queue with a 4-GPU quota, all 4 in use, on a cluster with 1 A100 free
    nodes = [node("a", 64, gpus=5, gpu_type="A100", free_gpu_ids=["4"])]
    queues = [Queue("team-a", team="a", gpus={"A100": 4}, borrowing=False)]
    running = [RunningJob("r1", "old", "team-a", "a", replicas=[ReplicaUse("a", 1, GB, ["0", "1", "2", "3"])])]
    jobs = [job(f"w{i}", i, queue="team-a", team="a", gpu=2, gpu_types=("A100",)) for i in range(4)]
    # when
    p = plan(nodes, jobs, running, queues)
    # then
    assert p.reasons["w3"] == ("needs 2 × A100, 1 free on any node; 3 jobs ahead in queue team-a; "
                               "queue quota 4/4 A100 GPUs in use (borrowing off)")
    assert [p.positions[f"w{i}"] for i in range(4)] == [0, 1, 2, 3]


def test_a_job_no_node_could_ever_run_says_so():
    nodes = [node("a", 8, gpus=2, gpu_type="T4")]
    p = plan(nodes, [job("x", gpu=1, gpu_types=("H100",)), job("y", cpu=64), job("z", node_selector={"zone": "b"}),
                     job("g", gpu=4)])
    assert p.reasons["x"] == "no node can run it: no node has GPU type H100 (have: T4)"
    assert p.reasons["g"] == "no node can run it: asks for 4 GPUs per replica, the largest node has 2"
    assert p.reasons["y"] == "no node can run it: asks for 64 cores, the largest node has 8"
    assert p.reasons["z"] == "no node can run it: no node has labels zone=b"


def test_retry_backoff_holds_a_job_back_with_the_last_reason():
    p = plan([node("a")], [job("r", not_before=50, last_reason="OOMKilled")], now=20)
    assert not p.admissions and p.reasons["r"].startswith("retrying in 30s after OOMKilled")


def test_higher_priority_goes_first():
    p = plan([node("a", 4)], [job("low", 0, cpu=4, priority=0), job("high", 1, cpu=4, priority=200)])
    assert list(p.admissions) == ["high"]
