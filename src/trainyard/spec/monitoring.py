"""What monitoring hands out: status events, a job's resource use, and usage reports."""

from __future__ import annotations


from pydantic import BaseModel, Field

from trainyard.spec.choices import UsageBy  # noqa: F401  (re-exported: the API's records name it)


class EventInfo(BaseModel):
    """One status change, as the store's triggers recorded it."""

    ts: float
    old_status: str | None = Field(None, description="None: the object was created")
    new_status: str
    reason: str | None = None
    actor: str = Field(description="who caused it: user, scheduler, launcher, system, pipeline-runner")


class ReplicaUsageInfo(BaseModel):
    """What one replica of one attempt used, from the launcher's samples."""

    attempt: int
    replica: int
    samples: int
    cpu_percent: float | None = Field(None, description="latest, percent of one core")
    memory_bytes: int | None = Field(None, description="latest resident memory of the process tree")
    peak_memory_bytes: int | None = None
    gpu_util: float | None = Field(None, description="latest, percent, mean over its GPUs")
    gpu_memory_bytes: int | None = None
    mean_gpu_util: float | None = None
    idle_since: float | None = Field(None, description="GPUs under the idle threshold since (launcher clock)")
    idle_flagged_at: float | None = None


class UsageRow(BaseModel):
    """Resource-hours of one group; ``*_preempted`` and ``*_failed`` are parts of the total."""

    key: str
    attempts: int = 0
    gpu_hours: float = 0.0
    gpu_hours_preempted: float = 0.0
    gpu_hours_failed: float = 0.0
    cpu_hours: float = 0.0
    cpu_hours_preempted: float = 0.0
    cpu_hours_failed: float = 0.0
    memory_gib_hours: float = 0.0
    memory_gib_hours_preempted: float = 0.0
    memory_gib_hours_failed: float = 0.0
    cost: float | None = Field(None, description="with the server's prices; None when it has none")


class UsageReport(BaseModel):
    by: UsageBy
    since: float
    until: float
    currency: str | None = None
    rows: list[UsageRow]
