from trainyard.scheduler.admission import FifoAdmission, check_fits_some_node
from trainyard.spec import parse_job
from trainyard.spec.records import JobInfo, NodeInfo


def job(i: int, **resources) -> JobInfo:
    res = ", ".join(f"{k}: {v}" for k, v in resources.items())
    spec = parse_job(f"name: j{i}\ncommand: x\nresources: {{{res}}}\n")
    return JobInfo(id=f"j{i}", name=spec.name, status="pending", queue="default", priority=100, spec=spec,
                   created_at=i, updated_at=i)


def node(name="n", cpu=4, memory=8 * 2**30, gpus=0, gpu_type=None, **kw) -> NodeInfo:
    return NodeInfo(name=name, cpu=cpu, memory=memory, gpu=gpus, gpu_type=gpu_type,
                    gpu_ids=[str(i) for i in range(gpus)], **kw)


def test_admits_in_order_while_they_fit_and_says_why_the_rest_wait():
    plan = FifoAdmission().plan([job(1, cpu=3), job(2, cpu=2), job(3, cpu=1)], [node(cpu=4)], now=0)
    assert [p.job_id for p in plan.placements] == ["j1", "j3"]
    assert plan.reasons["j2"] == "needs 2 cores (1 free)"


def test_gpus_are_never_shared_and_types_are_honoured():
    n = node(gpus=4, gpu_type="A100", gpus_used=["0"], cpu_used=0)
    plan = FifoAdmission().plan([job(1, gpu=2), job(2, gpu=2), job(3, gpu=1, gpu_type="H100")], [n], now=0)
    assert plan.placements[0].replicas == [("n", ["1", "2"])]
    assert "2 × GPU (1 free on any node)" in plan.reasons["j2"]
    assert "1 jobs ahead" not in plan.reasons["j2"]
    assert "H100" in plan.reasons["j3"] and "1 job ahead" in plan.reasons["j3"]


def test_retry_backoff_holds_a_job_back():
    j = job(1)
    j.not_before = 50
    plan = FifoAdmission().plan([j], [node()], now=20)
    assert not plan.placements and plan.reasons["j1"].startswith("retrying in 30s")


def test_a_request_larger_than_any_node_names_the_field():
    nodes = [node(cpu=4, gpus=2, gpu_type="A100"), node("m", cpu=8)]
    assert check_fits_some_node(job(1, cpu=16).spec, nodes)[0] == "resources.cpu"
    assert check_fits_some_node(job(1, gpu=4).spec, nodes)[0] == "resources.gpu"
    assert check_fits_some_node(job(1, gpu=1, gpu_type="V100").spec, nodes)[0] == "resources.gpu_type"
    assert check_fits_some_node(job(1, memory="64Gi").spec, nodes)[0] == "resources.memory"
    assert check_fits_some_node(job(1, cpu=8).spec, nodes) is None
    # each part fits some node, but no node has all of it
    assert check_fits_some_node(job(1, cpu=8, gpu=1).spec, nodes)[0] == "resources"


def test_a_gang_is_placed_whole_or_not_at_all():
    spec = parse_job("name: g\ncommand: x\nreplicas: 3\ndistributed: torch\nresources: {cpu: 2, gpu: 1}\n")
    gang = JobInfo(id="g", name="g", status="pending", queue="default", priority=100, spec=spec,
                   created_at=0, updated_at=0)
    nodes = [node("a", cpu=4, gpus=2, gpu_type="T4"), node("b", cpu=4, gpus=2, gpu_type="T4")]
    plan = FifoAdmission().plan([gang, job(2, cpu=1)], nodes, now=0)
    assert plan.placements[0].replicas == [("a", ["0"]), ("a", ["1"]), ("b", ["0"])]
    assert plan.placements[1].replicas == [("b", ["1"])] or plan.placements[1].replicas[0][0] == "b"
    too_big = FifoAdmission().plan([gang], nodes[:1], now=0)
    assert not too_big.placements and too_big.reasons["g"].startswith("3 replicas, each needs")
