"""Ray's node records as trainyard nodes: the GPU-type and label conventions (no cluster needed)."""

from trainyard.engines.ray import nodes


def raw(node_id="ab" * 28, alive=True, **resources):
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": "10.0.0.7",
            "Resources": {"CPU": 8.0, "memory": 4 * 2**30, "node:10.0.0.7": 1.0, **resources},
            "Labels": {"ray.io/node-id": node_id, "zone": "a"}}


def test_gpu_type_comes_from_the_gpu_type_resource_before_rays_accelerator_type():
    info = nodes.node_info(raw(GPU=2.0, **{"gpu_type:A100": 2.0, "accelerator_type:H100": 1.0}))
    assert (info.gpu, info.gpu_type, info.gpu_ids) == (2, "A100", ["0", "1"])
    assert nodes.node_info(raw(GPU=1.0, **{"accelerator_type:L4": 1.0})).gpu_type == "L4"
    assert nodes.node_info(raw(**{"gpu_type:A100": 2.0})).gpu_type is None  # a type without GPUs means nothing


def test_labels_come_from_ray_labels_and_label_resources_but_not_rays_own():
    info = nodes.node_info(raw(**{"label:disk=ssd": 1.0, "label:zone=b": 1.0}))
    assert info.labels == {"zone": "a", "disk": "ssd", "ray.address": "10.0.0.7"}
    assert (info.cpu, info.memory, info.name) == (8.0, 4 * 2**30, "ab" * 6)


def test_ray_nodes_claim_only_sampled_memory_enforcement():
    assert nodes.node_info(raw()).memory_enforcement == "sampled"  # ray.nodes() cannot say more


def test_dead_nodes_are_left_out_but_still_found_by_name():
    a, b = raw("aa" * 28), raw("bb" * 28, alive=False)
    assert [n["NodeID"] for n in nodes.alive([a, b])] == [a["NodeID"]]
    assert nodes.find([a, b], "bb" * 6) is b and nodes.find([a, b], "cc" * 6) is None


def test_a_bundle_holds_what_one_replica_asks_and_is_never_empty():
    assert nodes.bundle(2.0, 2**30, 1) == {"CPU": 2.0, "GPU": 1.0, "memory": float(2**30)}
    assert nodes.bundle(0.0, None, 0) == {"CPU": 0.01}
