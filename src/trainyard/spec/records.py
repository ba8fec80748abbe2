"""What the API returns: jobs, attempts, nodes, metrics, artifacts, log chunks.

The same models are used by the store (rows → records), the API (responses)
and the SDK (parsed responses), so the shape is written once.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from trainyard.spec.job import JobSpec
from trainyard.spec.queue import QueueSpec
from trainyard.spec.submitted import as_stored
from trainyard.status import AttemptStatus, JobStatus

# a code snapshot's content address, as the artifact store names it
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
Digest = Annotated[str, Field(pattern=DIGEST_PATTERN, description="sha256: and 64 lower-case hex digits")]
# a listing's next_cursor: a row's seq, which a BIGINT column holds (at most 19 digits)
CURSOR_PATTERN = r"^[0-9]{1,18}$"


class ReplicaInfo(BaseModel):
    index: int
    node: str
    gpus: list[str] = Field(default_factory=list)
    status: AttemptStatus
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    last_contact_at: float | None = None


class AttemptInfo(BaseModel):
    id: str
    job_id: str
    number: int
    status: AttemptStatus
    node: str | None = Field(None, description="replica 0's node")
    gpus: list[str] = Field(default_factory=list, description="replica 0's GPUs")
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    created_at: float
    started_at: float | None = None
    ended_at: float | None = None
    last_contact_at: float | None = None
    stop_reason: str | None = Field(None, description="set once the attempt must stop (cancel, preemption, a failed replica)")
    handle: dict[str, Any] = Field(default_factory=dict)
    preempted_by: str | None = Field(None, description="the job this attempt was stopped to make room for")
    borrowed: bool | None = Field(None, description="admitted beyond its queue's quota, on idle capacity")
    replicas: list[ReplicaInfo] = Field(default_factory=list)


class JobInfo(BaseModel):
    id: str
    name: str
    status: JobStatus
    queue: str
    priority: int
    spec: Annotated[JobSpec, as_stored(JobSpec)]
    snapshot: str | None = None
    created_at: float
    updated_at: float
    not_before: float | None = None
    reason: str | None = Field(None, description="why it is pending, or how it ended")
    position: int | None = Field(None, description="while pending: jobs ahead of it in its queue")
    owner: str | None = Field(None, description="the user who submitted it (none: the server's own identity)")
    team: str | None = Field(None, description="the team it belongs to: who may see it")
    attempts: list[AttemptInfo] = Field(default_factory=list)

    @property
    def last_attempt(self) -> AttemptInfo | None:
        return self.attempts[-1] if self.attempts else None


class JobPage(BaseModel):
    items: list[JobInfo]
    next_cursor: str | None = Field(None, description="pass as cursor for the next page (submit-order sorts)")
    more: bool = Field(False, description="a page follows this one")
    total: int | None = Field(None, description="with count=true: the jobs that match, counted up to a cap")
    total_capped: bool = Field(False, description="more jobs match than total (the cap)")


# How a node holds a job to its memory limit; the values are trainyard.launch.cgroup's
# V1, V2 and SAMPLED (the launcher stays free of pydantic, so they are spelled twice).
MemoryEnforcement = Literal["cgroup-v1", "cgroup-v2", "sampled"]


class NodeCordon(BaseModel):
    """Why a node takes no new attempts, who said so and when; ``drained_at`` once its attempts were requeued."""

    reason: str | None = None
    by: str | None = None
    at: float
    drained_at: float | None = None


# a word, not null, where a GPU's job is another team's: clients from before it read the holder as a string
HIDDEN_HOLDER = "hidden"


class NodeInfo(BaseModel):
    name: str
    cpu: float
    memory: int
    gpu: int = 0
    gpu_type: str | None = None
    gpu_ids: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    # how a job's memory limit holds there: a hard limit in its own cgroup, or the launcher's RSS sampling
    memory_enforcement: MemoryEnforcement = "sampled"
    # filled by the server from running attempts
    cpu_used: float = 0.0
    memory_used: int = 0
    gpus_used: list[str] = Field(default_factory=list)
    gpu_holders: dict[str, str] = Field(default_factory=dict, description=f"GPU id -> the job holding it "
                                        f"({HIDDEN_HOLDER!r}: a job the caller may not see)")
    attempts: int = Field(0, description="live attempts with a replica here")
    cordon: NodeCordon | None = Field(None, description="set while an admin keeps new work off this node")

    @property
    def cordoned(self) -> bool:
        return self.cordon is not None

    def fresh(self, **update: Any) -> NodeInfo:
        """A copy whose lists and dicts are its own (what a caller may add to): ``model_copy(deep=True)``
        went through ``copy.deepcopy`` field by field, ~1.5 % of the server's CPU in a burst of submits."""
        return self.model_copy(update={"gpu_ids": list(self.gpu_ids), "labels": dict(self.labels),
                                       "gpus_used": list(self.gpus_used), "gpu_holders": dict(self.gpu_holders),
                                       **update})


class MetricPoint(BaseModel):
    attempt: int
    replica: int = 0
    step: int | None
    name: str
    value: float
    ts: float


class ArtifactInfo(BaseModel):
    attempt: int
    path: str
    size: int
    digest: str


class AttemptOutputs(NamedTuple):
    """A job's outputs: one attempt's (``GET /jobs/ID/outputs`` sends ``files``, and ``attempt`` as ``X-Attempt``)."""

    attempt: int | None  # the attempt whose outputs these are; None: no attempt has ended yet
    files: list[ArtifactInfo]


class LogChunk(BaseModel):
    attempt: int
    replica: int = 0
    offset: int
    data: str


class QueueUsage(BaseModel):
    running: int = 0
    borrowed: int = Field(0, description="running jobs admitted beyond the quota")
    cpu: float = 0.0
    memory: int = 0
    gpu: dict[str, int] = Field(default_factory=dict, description="GPUs held, by type")


class TeamShare(BaseModel):
    """A team's standing in fair share: at equal priority, the team with the smallest dominant share goes next."""

    team: str
    share: float = Field(0.0, description="the largest share of any one resource (cores, memory, GPUs of a type) "
                                          "that the team's running jobs hold of the whole cluster, 0 to 1")
    dominant: str | None = Field(None, description="that resource: cpu, memory or gpu:TYPE; none while it holds nothing")
    rank: int = Field(1, description="1 for the team furthest behind (its jobs go first), then up")
    teams: int = Field(1, description="teams ranked")


class QueueInfo(BaseModel):
    queue: QueueSpec
    usage: QueueUsage = Field(default_factory=QueueUsage)
    pending: int = 0
    fair_share: TeamShare | None = Field(None, description="the standing of the team that owns the queue")
