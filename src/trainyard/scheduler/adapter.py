"""Build the planner's model from the platform's records, and nothing else.

The loop calls :func:`inputs` once per cycle with what the store and the
engine report, hands the result to :func:`trainyard.scheduler.plan.plan`,
and applies the plan. An attempt's stored ``borrowed`` flag says how it was
admitted; the planner is given None and re-decides each cycle from the
queue's quota, so work that fits the quota again stops counting as borrowed.
"""

from __future__ import annotations

from typing import Iterable

from trainyard.scheduler.model import Node, PendingJob, Queue, ReplicaUse, RunningJob, default_queue
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, JobInfo, NodeInfo
from trainyard.status import Reason
from trainyard.store.moves import Waiting


def queue_map(queues: Iterable[Queue] | None) -> dict[str, Queue]:
    """Configured queues by name; with none configured, one unlimited ``default`` queue."""
    out = {q.name: q for q in queues or ()}
    return out or {"default": default_queue()}


def node(info: NodeInfo) -> Node:
    """A node with what is free on it; ``*_used`` must count every live attempt, stopping ones too."""
    used = set(info.gpus_used)
    return Node(
        name=info.name, cpu=info.cpu, memory=info.memory, gpus=info.gpu, gpu_type=info.gpu_type,
        labels=dict(info.labels), cpu_free=info.cpu - info.cpu_used, memory_free=info.memory - info.memory_used,
        free_gpu_ids=[g for g in info.gpu_ids if g not in used], cordoned=info.cordoned,
    )


def _team_of(name: str, team: str | None, queues: dict[str, Queue]) -> str:
    """The job's own team (a job of the default queue is its submitter's), else its queue's: fair share
    charges it there, and a quota guarding another team's work is checked against it."""
    return team or (queues.get(name) or default_queue(name)).team


def pending_job(job: Waiting, spec: JobSpec, queues: dict[str, Queue]) -> PendingJob:
    r = spec.resources
    return PendingJob(
        id=job.id, queue=job.queue, team=_team_of(job.queue, job.team, queues), priority=job.priority,
        seq=job.created_at, submitted_at=job.created_at, replicas=spec.replicas, cpu=r.cpu, memory=r.memory or 0,
        gpu=r.gpu, gpu_types=tuple(r.gpu_types), node_selector=dict(r.node_selector), placement=spec.placement,
        timeout=spec.timeout, preemptible=spec.preemptible, not_before=job.not_before,
        last_preempted_by=job.last_preempted_by, last_reason=job.last_reason,
    )


def running_job(attempt: AttemptInfo, spec: JobSpec, queue: str, priority: int,
                queues: dict[str, Queue], submitted_at: float | None = None, team: str | None = None) -> RunningJob:
    """A live attempt with what each replica holds. ``spec`` is the job's (resources per replica)."""
    r = spec.resources
    placed = [(p.node, list(p.gpus)) for p in attempt.replicas] or [(attempt.node, list(attempt.gpus))]
    started = attempt.started_at or attempt.created_at
    return RunningJob(
        attempt_id=attempt.id, job_id=attempt.job_id, queue=queue, team=_team_of(queue, team, queues),
        priority=priority, replicas=[ReplicaUse(n, r.cpu, r.memory or 0, g) for n, g in placed if n],
        started_at=started, expected_end=started + spec.timeout if spec.timeout is not None else None,
        preemptible=spec.preemptible, borrowed=None,  # the planner re-decides borrowing each cycle
        stopping=attempt.stop_reason is not None, preempted=attempt.stop_reason == Reason.PREEMPTED.value,
        submitted_at=submitted_at,
    )


def inputs(pending: list[tuple[Waiting, JobSpec]], live: list[tuple[JobInfo, AttemptInfo]], nodes: list[NodeInfo],
           queues: Iterable[Queue] | None = None) -> tuple[list[Node], list[PendingJob], list[RunningJob], list[Queue]]:
    """Everything :func:`plan` takes, from the store's pending jobs (with their specs), live
    attempts (with their jobs), and the engine's nodes."""
    qs = queue_map(queues)
    running = [running_job(a, j.spec, j.queue, j.priority, qs, j.created_at, j.team) for j, a in live]
    return [node(n) for n in nodes], [pending_job(w, spec, qs) for w, spec in pending], running, list(qs.values())
