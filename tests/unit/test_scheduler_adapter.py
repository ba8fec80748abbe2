"""From the platform's records to the planner's model, and a plan over them."""

from trainyard.scheduler import adapter
from trainyard.scheduler.model import Queue
from trainyard.scheduler.plan import plan
from trainyard.spec import parse_job
from trainyard.spec.records import AttemptInfo, JobInfo, NodeInfo, ReplicaInfo
from trainyard.store import Waiting


def job_info(id: str, yaml: str, created_at: float = 0.0, **kw) -> JobInfo:
    spec = parse_job(f"name: {id}\ncommand: x\n{yaml}")
    return JobInfo(id=id, name=id, status="pending", queue=spec.queue, priority=spec.priority, spec=spec,
                   created_at=created_at, updated_at=created_at, **kw)


def waiting(info: JobInfo, last_reason=None, last_preempted_by=None) -> Waiting:
    return Waiting(info.id, info.queue, info.priority, info.created_at, info.not_before, last_reason, last_preempted_by)


def test_a_pending_job_carries_its_resources_gang_and_queue_team():
    info = job_info("g", "queue: vision\npriority: high\nreplicas: 2\ndistributed: torch\ntimeout: 1h\n"
                         "resources: {cpu: 4, memory: 8Gi, gpu: 2, gpu_type: [A100, H100], node_selector: {ib: 'true'}}\n",
                    created_at=5.0)
    job = adapter.pending_job(waiting(info), info.spec, adapter.queue_map([Queue("vision", team="cv")]))
    assert (job.queue, job.team, job.priority, job.seq, job.replicas) == ("vision", "cv", 200, 5.0, 2)
    assert (job.cpu, job.memory, job.gpu, job.gpu_types) == (4, 8 * 2**30, 2, ("A100", "H100"))
    assert job.node_selector == {"ib": "true"} and job.timeout == 3600 and job.placement == "pack" and job.preemptible


def test_with_no_queues_configured_everything_goes_to_one_unlimited_default_queue():
    queues = adapter.queue_map(None)
    assert list(queues) == ["default"] and queues["default"].gpus is None and queues["default"].team == "default"


def test_a_node_frees_what_running_attempts_do_not_use():
    n = adapter.node(NodeInfo(name="n", cpu=8, memory=64, gpu=2, gpu_type="T4", gpu_ids=["0", "1"],
                              cpu_used=3, memory_used=16, gpus_used=["0"]))
    assert (n.cpu_free, n.memory_free, n.free_gpu_ids, n.gpu_type) == (5, 48, ["1"], "T4")


def test_a_live_attempt_holds_its_resources_on_every_replica_node():
    info = job_info("g", "replicas: 2\ndistributed: torch\ntimeout: 600\nresources: {cpu: 2, gpu: 1}\n")
    attempt = AttemptInfo(id="g-1", job_id="g", number=1, status="running", created_at=1.0, started_at=10.0,
                          replicas=[ReplicaInfo(index=0, node="a", gpus=["0"], status="running"),
                                    ReplicaInfo(index=1, node="b", gpus=["1"], status="running")],
                          stop_reason="Preempted")
    r = adapter.running_job(attempt, info.spec, info.queue, info.priority, adapter.queue_map(None))
    assert [(p.node, p.cpu, p.gpu_ids) for p in r.replicas] == [("a", 2, ["0"]), ("b", 2, ["1"])]
    assert (r.started_at, r.expected_end, r.stopping) == (10.0, 610.0, True)


def test_inputs_build_a_plan_end_to_end():
    nodes = [NodeInfo(name="n", cpu=4, memory=2**34, gpu=1, gpu_type="T4", gpu_ids=["0"])]
    pending = [job_info("a", "resources: {gpu: 1}\n", 1.0), job_info("b", "resources: {gpu: 1}\n", 2.0)]
    p = plan(*adapter.inputs([(waiting(j), j.spec) for j in pending], [], nodes), now=3.0)
    assert [(j, [(a.node, a.gpu_ids) for a in r]) for j, r in p.admissions.items()] == [("a", [("n", ["0"])])]
    assert p.reasons["b"] == ("needs 1 × GPU, 0 free on any node; next to start: 1 node held for it until running work ends "
                           "(no timeout says when); first in queue default")


def test_a_live_attempt_carries_its_jobs_submit_time_so_the_planner_knows_how_long_it_waited():
    info = job_info("w", "resources: {gpu: 1}\n", 5.0)
    attempt = AttemptInfo(id="w-1", job_id="w", number=1, status="running", created_at=90.0, started_at=100.0,
                          node="n", gpus=["0"])
    _, _, running, _ = adapter.inputs([], [(info, attempt)], [])
    assert (running[0].submitted_at, running[0].started_at) == (5.0, 100.0)


def test_a_job_of_the_default_queue_is_its_submitters_teams():
    # given jobs an nlp member submitted to the default queue, one waiting and one running
    waits = job_info("w", "resources: {gpu: 1}\n", 1.0, team="nlp")
    runs = job_info("r", "resources: {gpu: 1}\n", 1.0, team="nlp")
    attempt = AttemptInfo(id="r-1", job_id="r", number=1, status="running", created_at=1.0, node="n", gpus=["0"])
    w = Waiting(waits.id, waits.queue, waits.priority, waits.created_at, None, None, None, None, waits.team)
    # when the planner's model is built, then both are nlp's: fair share charges nlp, and a quota
    # guarding another team's work is checked against nlp
    _, pending, running, _ = adapter.inputs([(w, waits.spec)], [(runs, attempt)], [])
    assert (pending[0].queue, pending[0].team, running[0].team) == ("default", "nlp", "nlp")
    # and a job of no team (the server's own) stays the queue's
    assert adapter.pending_job(waiting(waits), waits.spec, adapter.queue_map(None)).team == "default"
