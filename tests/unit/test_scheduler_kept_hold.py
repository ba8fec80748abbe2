"""A job keeps the nodes of its last reservation (``PendingJob.held``): a node that frees elsewhere goes to the
line, and the hold is chosen afresh only when a kept node can no longer take it or the job's start there is
unknown."""

from trainyard.scheduler.cycle import Options
from trainyard.scheduler.model import INF, Node, PendingJob, ReplicaUse, Reservation, RunningJob
from trainyard.scheduler.plan import plan
from trainyard.scheduler.simulate import SimJob, Simulator

GB = 10**9


def cluster(n=3) -> list[Node]:
    return [Node(f"n{i}", 32, 256 * GB, 8, "A100") for i in range(n)]


def busy(node: str, until: float | None, i: int = 0) -> RunningJob:
    return RunningJob(f"r{node}#{i}", f"r{node}", replicas=[ReplicaUse(node, 1, GB, [str(g) for g in range(8)])],
                      expected_end=until)


def job(id, seq, **kw) -> PendingJob:
    return PendingJob(id, seq=float(seq), gpu=8, memory=GB, **kw)


def free(nodes: list[Node], *busy_names: str) -> list[Node]:
    for n in nodes:
        n.free_gpu_ids = [] if n.name in busy_names else [str(g) for g in range(8)]
    return nodes


def test_a_node_that_frees_elsewhere_goes_to_the_line_not_to_the_hold():
    # given a 2-node gang holding n0 and n1, which drain by t=2000
    live = [busy("n0", 1000.0), busy("n1", 2000.0), busy("n2", 3000.0)]
    first = plan(free(cluster(), "n0", "n1", "n2"), [job("gang", 0, replicas=2)], live, now=0)
    assert [(r.job_id, sorted(r.nodes), r.start) for r in first.reservations] == [("gang", ["n0", "n1"], 2000.0)]
    # when n2's work ends early, and an 8-GPU job that would run past t=2000 waits behind the gang
    live, line = live[:2], [job("gang", 0, replicas=2, held=first.reservations[0]), job("eight", 1, timeout=5000)]
    p = plan(free(cluster(), "n0", "n1"), line, live, now=100)
    # then the gang keeps its nodes and start, and the 8-GPU job starts on n2
    assert [(r.job_id, sorted(r.nodes), r.start) for r in p.reservations] == [("gang", ["n0", "n1"], 2000.0)]
    assert [a.node for a in p.admissions["eight"]] == ["n2"]
    # while a hold chosen afresh takes n2 the moment it frees, and the 8-GPU job waits
    line[0].held = None
    fresh = plan(free(cluster(), "n0", "n1"), line, live, now=100)
    assert [(r.job_id, sorted(r.nodes), r.start) for r in fresh.reservations] == [("gang", ["n0", "n2"], 1000.0)]
    assert "eight" not in fresh.admissions


def test_a_hold_is_chosen_afresh_when_a_kept_node_is_gone():
    live = [busy("n0", 1000.0), busy("n1", 2000.0)]
    line = [job("gang", 0, replicas=2, held=Reservation("gang", ["n1", "n9"], 2000.0)), job("eight", 1, timeout=5000)]
    p = plan(free(cluster(), "n0", "n1"), line, live, now=100)
    assert [(r.job_id, sorted(r.nodes), r.start) for r in p.reservations] == [("gang", ["n0", "n2"], 1000.0)]


def test_a_hold_is_chosen_afresh_when_its_start_on_the_kept_nodes_is_unknown():
    # given kept nodes, one of them running work without a timeout (it may never end)
    live = [busy("n0", None), busy("n1", 2000.0), busy("n2", 3000.0)]
    line = [job("gang", 0, replicas=2, held=Reservation("gang", ["n0", "n1"], INF))]
    p = plan(free(cluster(), "n0", "n1", "n2"), line, live, now=100)
    # then the gang holds the nodes whose work is bounded instead
    assert [(r.job_id, sorted(r.nodes), r.start) for r in p.reservations] == [("gang", ["n1", "n2"], 3000.0)]


def test_a_kept_node_held_this_cycle_by_a_job_ahead_is_not_shared():
    # given two gangs that each held nodes last cycle, the one first in line now claiming one of the other's
    live = [busy("n0", 1000.0), busy("n1", 2000.0), busy("n2", 3000.0)]
    line = [job("a", 0, replicas=2, held=Reservation("a", ["n1", "n2"], 3000.0)),
            job("b", 1, replicas=2, held=Reservation("b", ["n0", "n1"], 2000.0))]
    p = plan(free(cluster(4), "n0", "n1", "n2", "n3"), line, live + [busy("n3", 4000.0)], now=100,
             options=Options(max_reservations=2))
    held = {r.job_id: set(r.nodes) for r in p.reservations}
    assert held["a"] == {"n1", "n2"}
    assert not held.get("b", set()) & held["a"]


def test_the_simulator_hands_each_cycle_the_holds_of_the_last():
    # given a gang blocked behind two busy nodes and a third node whose work ends first
    nodes = cluster()
    seen: list[tuple] = []
    sim = Simulator(nodes, policy=lambda *a: _spy(seen, *a))
    fill = [SimJob(job(f"f{i}", i, timeout=t), 0.0, d) for i, (t, d) in enumerate([(1000, 900), (2000, 1900),
                                                                                      (3000, 100)])]
    gang = SimJob(job("gang", 9, replicas=2, timeout=600), 1.0, 600.0)
    eight = SimJob(job("eight", 10, timeout=5000), 150.0, 100.0)
    out = sim.run(fill + [gang, eight], until=4000.0)
    # then the gang's hold stays on the nodes it first held, and the 8-GPU job gets the node freed early
    assert len(seen) > 1 and len(set(seen)) == 1
    assert out.started["eight"] == 150.0
    # and the gang still starts wherever room comes first: at t=900, on the 8-GPU job's node (free since 250)
    # and the first of its held nodes to drain
    assert out.started["gang"] == 900.0


def _spy(seen, nodes, pending, running, queues, now):
    seen.extend((j.id, tuple(sorted(j.held.nodes))) for j in pending if j.held)
    return plan(nodes, pending, running, queues, now)
