"""A placement that is given back leaves the cluster as it found it, node order included.

Best fit takes the first fitting node of a bucket, so a try that admits nothing must not
move nodes within their buckets: later decisions would depend on it (bench/RESULTS.md,
session 12: one repeated failed try moved the busy day's 8-GPU wait ratio from ×4.7 to ×8.1).
"""

from trainyard.scheduler.cluster import Cluster
from trainyard.scheduler.model import INF, Node, PendingJob

GB = 10**9


def gpu_node(name, free=8, cpu=64):
    return Node(name, cpu, 512 * GB, 8, "A100", free_gpu_ids=[str(i) for i in range(8 - free, 8)],
                cpu_free=cpu)


def state(cl: Cluster) -> dict:
    """Everything a later placement reads: each bucket's nodes in order, and each node's room."""
    return {
        "gpu buckets": {t: [[s.name for s in b] for b in bs] for t, bs in cl.gb.items()},
        "cpu buckets": [[[s.name for s in b] for b in tier] for tier in cl.cb],
        "room": {s.name: (s.cpu, s.mem, list(s.gids), s.resv) for s in cl.slots},
        "totals": (cl.cpu_free, cl.mem_free, dict(cl.gfree)),
    }


def cluster() -> Cluster:
    # three whole nodes and two half-free ones: 32 GPUs free, enough by count for a gang of four
    # 8-GPU replicas, which still cannot be placed (only three nodes have 8 free)
    nodes = [gpu_node("a"), gpu_node("b"), gpu_node("c"), gpu_node("d", free=4, cpu=32),
             gpu_node("e", free=4, cpu=32), Node("cpu1", 16, 64 * GB)]
    return Cluster(nodes)


GANG = PendingJob("gang", cpu=8, memory=GB, gpu=8, replicas=4)


def test_a_failed_gang_placement_leaves_every_bucket_in_its_order():
    # given a cluster, and the same cluster after a gang took three nodes and gave them back
    cl, untouched = cluster(), cluster()
    # when
    assert cl.place(GANG, "A100", (), INF) is None
    # then nothing differs from never having tried
    assert state(cl) == state(untouched)


def test_after_a_failed_gang_the_next_job_gets_the_node_it_would_have_got():
    cl, untouched = cluster(), cluster()
    assert cl.place(GANG, "A100", (), INF) is None
    one = PendingJob("one", cpu=8, memory=GB, gpu=8)
    assert cl.place(one, "A100", (), INF)[0].slot.name == untouched.place(one, "A100", (), INF)[0].slot.name


def test_a_placement_given_back_in_reverse_order_leaves_the_cluster_as_it_was():
    # a probe (does it fit now?) places a gang and gives it back; spread puts each replica on its own node
    for gang in (PendingJob("g", cpu=8, memory=GB, gpu=2, replicas=3),
                 PendingJob("s", cpu=8, memory=GB, gpu=2, replicas=3, placement="spread"),
                 PendingJob("c", cpu=4, memory=GB, replicas=3)):
        cl, untouched = cluster(), cluster()
        taken = cl.place(gang, "A100" if gang.gpu else None, (), INF)
        assert taken
        for rec in reversed(taken):
            cl.give(rec)
        assert state(cl) == state(untouched), gang.id


def test_room_given_back_out_of_order_is_all_there_again():
    # given two single-replica takes from the same bucket, handed back first-taken first
    cl, untouched = cluster(), cluster()
    one = PendingJob("one", cpu=8, memory=GB, gpu=8)
    first, second = cl.place(one, "A100", (), INF)[0], cl.place(one, "A100", (), INF)[0]
    # when
    cl.give(first)
    cl.give(second)
    # then every node has its room back and sits in the bucket for it, if not at its old position
    mine, theirs = state(cl), state(untouched)
    assert mine["room"] == theirs["room"] and mine["totals"] == theirs["totals"]
    assert {t: [sorted(b) for b in bs] for t, bs in mine["gpu buckets"].items()} == \
        {t: [sorted(b) for b in bs] for t, bs in theirs["gpu buckets"].items()}
    assert [[sorted(b) for b in tier] for tier in mine["cpu buckets"]] == \
        [[sorted(b) for b in tier] for tier in theirs["cpu buckets"]]
    assert all(b[s.gpos] is s for s in cl.slots if s.type for b in [cl.gb[s.type][s.gkey]])
    assert all(cl.cb[s.ctier][s.ckey][s.cpos] is s for s in cl.slots)
