from trainyard.scheduler.fit import check_fits_some_node
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


def test_a_request_larger_than_any_node_names_the_field():
    nodes = [node(cpu=4, gpus=2, gpu_type="A100"), node("m", cpu=8)]
    assert check_fits_some_node(job(1, cpu=16).spec, nodes)[0] == "resources.cpu"
    assert check_fits_some_node(job(1, gpu=4).spec, nodes) == ("resources.gpu", "asks for 4 GPUs; the largest node has 2")
    assert check_fits_some_node(job(1, gpu=1).spec, [node()]) == ("resources.gpu", "asks for 1 GPU; the largest node has 0")
    assert check_fits_some_node(job(1, gpu=1, gpu_type="V100").spec, nodes)[0] == "resources.gpu_type"
    assert check_fits_some_node(job(1, memory="64Gi").spec, nodes)[0] == "resources.memory"
    assert check_fits_some_node(job(1, cpu=8).spec, nodes) is None
    # each part fits some node, but no node has all of it
    assert check_fits_some_node(job(1, cpu=8, gpu=1).spec, nodes)[0] == "resources"


def test_spread_needs_a_node_per_replica():
    spec = parse_job("name: g\ncommand: x\nreplicas: 3\ndistributed: torch\nplacement: spread\nresources: {cpu: 1}\n")
    field, message = check_fits_some_node(spec, [node("a", cpu=8), node("b", cpu=8)])
    assert field == "placement" and "2 nodes can hold one" in message
    assert check_fits_some_node(spec, [node("a"), node("b"), node("c")]) is None
