"""Invariants over random clusters and job streams (hypothesis).

The simulator itself asserts, at every admission, that no node is
over-committed, that a gang is placed whole, and that GPU types, selectors
and spread are honoured; these tests add quotas, priorities and termination.
"""

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from trainyard.scheduler.model import Node, PendingJob, Queue, RunningJob
from trainyard.scheduler.plan import Options, plan
from trainyard.scheduler.simulate import SimJob, Simulator

GB = 10**9
QUEUES = [Queue("q1", team="t1", gpus={"A": 2}), Queue("q2", team="t2", cpu=8, borrowing=False), Queue("q3", team="t1")]
UNLIMITED = {q.name for q in QUEUES if q.cpu is None and q.memory is None and not q.gpus}
# no explain phase: it traces every line the planner runs, and outlasted the test's timeout after a
# failure was found (CI then reported the timeout beside the failure)
RUNS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink])


@st.composite
def clusters(draw) -> list[Node]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        gpus = draw(st.sampled_from([0, 1, 2, 4]))
        out.append(Node(f"n{i}", draw(st.sampled_from([4, 8, 16])), draw(st.sampled_from([8, 16, 32])) * GB, gpus,
                        draw(st.sampled_from(["A", "B"])) if gpus else None,
                        {"zone": draw(st.sampled_from(["x", "y"]))}))
    return out


@st.composite
def jobs(draw, i: int) -> SimJob:
    q = draw(st.sampled_from(QUEUES))
    duration = draw(st.floats(600, 3 * 3600))
    timeout = draw(st.one_of(st.none(), st.floats(1.0, 2.0).map(lambda f: duration * f)))
    job = PendingJob(
        f"j{i}", queue=q.name, team=q.team, priority=draw(st.sampled_from([0, 100, 200])), seq=float(i),
        replicas=draw(st.integers(1, 3)), cpu=draw(st.sampled_from([1, 2, 4])),
        memory=draw(st.sampled_from([1, 2, 4, 8])) * GB, gpu=draw(st.sampled_from([0, 0, 1, 2])),
        gpu_types=draw(st.sampled_from([(), ("A",), ("B",), ("A", "B")])),
        node_selector=draw(st.sampled_from([{}, {}, {"zone": "x"}])), placement=draw(st.sampled_from(["pack", "spread"])),
        timeout=timeout, preemptible=draw(st.booleans()))
    return SimJob(job, draw(st.floats(0, 5 * 3600)), duration)


def streams():
    return st.integers(1, 25).flatmap(lambda n: st.tuples(*[jobs(i) for i in range(n)]).map(list))


def quota_checked(nodes, pending, running, queues, now):
    """The planner, asserting that every admission not marked borrowed (and every admission to a queue
    that may not borrow) keeps its queue inside the quota on each limit it adds to, replayed in
    decision order on top of what runs."""
    p = plan(nodes, pending, running, queues, now)
    gpu_type = {n.name: n.gpu_type for n in nodes}
    use = {q.name: [0.0, {}] for q in QUEUES}
    for r in running:
        for u in r.replicas:
            use[r.queue][0] += u.cpu
            if u.gpu_ids:
                t = gpu_type[u.node]
                use[r.queue][1][t] = use[r.queue][1].get(t, 0) + len(u.gpu_ids)
    jobs = {j.id: j for j in pending}
    for job_id, places in p.admissions.items():
        j = jobs[job_id]
        q = next(x for x in QUEUES if x.name == j.queue)
        u = use[q.name]
        for a in places:
            u[0] += j.cpu
            if a.gpu_ids:
                u[1][gpu_type[a.node]] = u[1].get(gpu_type[a.node], 0) + len(a.gpu_ids)
        if job_id not in p.borrowed or not q.borrowing:  # on every limit the job itself adds to
            assert q.cpu is None or u[0] <= q.cpu + 1e-9, (job_id, u)
            assert not j.gpu or all(u[1].get(t, 0) <= cap for t, cap in (q.gpus or {}).items()
                                    if t == gpu_type[places[0].node]), (job_id, u)
    return p


@RUNS
@given(clusters(), streams())
def test_nodes_gangs_types_and_quotas_hold_over_a_whole_run(nodes, stream):
    # given any cluster and stream of jobs, when they all run to the end (the simulator checks every node)
    sim = Simulator(nodes, QUEUES, quota_checked)
    horizon = 5 * 3600 + 2 * sum(s.duration for s in stream) + 10 * 3600
    out = sim.run(stream, until=horizon)
    # then every job that could ever run did: nothing starves, nothing is lost
    for s in stream:
        alone = plan(nodes, [s.job], [], QUEUES)
        assert s.job.id in out.started or s.job.id not in alone.admissions, alone.reasons


def _to_fixpoint(nodes, stream, options) -> tuple[Simulator, object, int]:
    sim = Simulator(nodes, QUEUES, lambda *a: plan(*a, options=options))
    for s in stream:
        sim.jobs[s.job.id] = s
        sim.pending[s.job.id] = s.job
    for cycles in range(1, 60):
        p = sim.cycle()
        if not p.admissions and not p.preemptions:
            return sim, p, cycles
    raise AssertionError("no fixpoint: the planner keeps preempting or admitting with nothing new")


@RUNS
@given(clusters(), streams(), streams())
def test_no_job_waits_behind_lower_priority_work_it_could_preempt(nodes, first, later):
    # given a cluster running whatever fitted first, then more jobs arriving
    options = Options(max_searches=10_000)
    sim, _, _ = _to_fixpoint(nodes, first, options)
    for s in later:
        s.job.id = "L" + s.job.id
        s.job.seq += 1000
    for s in later:
        sim.jobs[s.job.id] = s
        sim.pending[s.job.id] = s.job
    # when planning until nothing changes (which must happen: no preemption loops)
    p = None
    for _ in range(60):
        p = sim.cycle()
        if not p.admissions and not p.preemptions:
            break
    else:
        raise AssertionError("no fixpoint")
    held = {n for r in p.reservations for n in r.nodes}
    # then no pending job could start inside its quota if the lower-priority work it may preempt were
    # gone (borrowing never preempts: room beyond a quota is only ever idle room)
    for job in list(sim.pending.values()):
        if job.last_preempted_by in sim.pending:
            continue  # it yields to the job that preempted it until that one starts
        # work inside another team's quota is guaranteed to it, work of a queue without one is not; and a job
        # of such a queue only borrows, so it stops only work of its own queue
        victims = [r for r in sim.running.values() if r.preemptible and r.priority < job.priority
                   and (r.queue == job.queue or job.queue not in UNLIMITED
                        and (r.team == job.team or r.queue in UNLIMITED))
                   and r.job_id != job.last_preempted_by and not {u.node for u in r.replicas} & held]
        if not victims:
            continue
        alt = _without(sim, victims, options)
        # with fewer running jobs fair share may order the line differently: another job then holds nodes,
        # and its queue's share of a quota, in place of the one holding them now, which says nothing of
        # whether preempting would have been right here
        if {r.job_id for r in alt.reservations} - {job.id} != {r.job_id for r in p.reservations} - {job.id}:
            continue
        # nodes held for the job at the head of the line stay held for it
        places = {a.node for a in alt.admissions.get(job.id, ())}
        assert not places or places & held or job.id in alt.borrowed, (job, p.reasons.get(job.id))


def _without(sim: Simulator, victims: list[RunningJob], options):
    gone = {r.attempt_id for r in victims}
    nodes = {n: Node(v.name, v.cpu, v.memory, v.gpus, v.gpu_type, v.labels, v.cpu_free, v.memory_free,
                     list(v.free_gpu_ids)) for n, v in sim.nodes.items()}
    for r in victims:
        for u in r.replicas:
            n = nodes[u.node]
            n.cpu_free += u.cpu
            n.memory_free += u.memory
            n.free_gpu_ids = n.free_gpu_ids + u.gpu_ids
    running = [r for r in sim.running.values() if r.attempt_id not in gone]
    return plan(list(nodes.values()), list(sim.pending.values()), running, QUEUES, sim.now, options=options)


@RUNS
@given(clusters(), streams(), streams(), st.data())
def test_admissions_only_use_free_room_never_room_still_held_by_stopping_work(nodes, first, later, data):
    # given work running, some of it told to stop and still exiting
    sim, _, _ = _to_fixpoint(nodes, first, Options())
    for r in sim.running.values():
        r.stopping = data.draw(st.booleans())
    pending = [s.job for s in later]
    # when
    p = plan(list(sim.nodes.values()), pending, list(sim.running.values()), QUEUES, sim.now)
    # then what is admitted fits in what is free now, GPU ids included
    free = {n.name: [n.cpu_free, n.memory_free, set(n.free_gpu_ids)] for n in sim.nodes.values()}
    jobs = {j.id: j for j in pending}
    for job_id, places in p.admissions.items():
        j = jobs[job_id]
        assert len(places) == j.replicas
        for a in places:
            f = free[a.node]
            f[0] -= j.cpu
            f[1] -= j.memory
            assert f[0] >= -1e-9 and f[1] >= 0 and set(a.gpu_ids) <= f[2] and len(a.gpu_ids) == j.gpu
            f[2] -= set(a.gpu_ids)
    assert not {x.attempt_id for x in p.preemptions} & {r.attempt_id for r in sim.running.values() if r.stopping}


@RUNS
@given(clusters(), streams(), streams(), st.randoms(use_true_random=False))
def test_decisions_do_not_depend_on_the_order_pending_jobs_are_given_in(nodes, first, later, rnd):
    # given a cluster running whatever fitted first, and a line of jobs with distinct submit times
    sim, _, _ = _to_fixpoint(nodes, first, Options())
    line = [s.job for s in later]
    for i, job in enumerate(line):
        job.id, job.seq = f"L{i}", 1000.0 + i
    shuffled = list(line)
    rnd.shuffle(shuffled)
    running, state = list(sim.running.values()), list(sim.nodes.values())
    # when the same line is planned in submit order and shuffled
    a = plan(state, line, running, QUEUES, sim.now)
    b = plan(state, shuffled, running, QUEUES, sim.now)
    # then the decisions are the same
    assert ({k: [(x.node, x.gpu_ids) for x in v] for k, v in a.admissions.items()}
            == {k: [(x.node, x.gpu_ids) for x in v] for k, v in b.admissions.items()})
    assert [(p.attempt_id, p.by) for p in a.preemptions] == [(p.attempt_id, p.by) for p in b.preemptions]
    assert (a.reasons, a.positions, a.borrowed) == (b.reasons, b.positions, b.borrowed)
