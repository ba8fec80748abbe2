"""On-demand Dask clusters: what a user asks for, and what the API says about one.

A cluster is a thin layer over jobs: its scheduler is one job and each worker
another, all in the cluster's queue, so they count against its quotas and are
placed like any job. These models are shared by the API, the SDK and the store.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator, model_validator

from trainyard.spec.job import Resources, Strict, check_name
from trainyard.spec.secret_refs import job_secrets
from trainyard.spec.submitted import PipRequirement, as_stored
from trainyard.spec.units import Bytes, Cores, Count, Seconds, parse_cpu, parse_duration, parse_memory

MAX_WORKERS = 1000  # each worker is a job the scheduler plans every cycle
DEFAULT_IDLE_TIMEOUT = 1800.0  # a forgotten cluster gives its machines back after 30 minutes


class ClusterStatus(str, Enum):
    PENDING = "pending"    # its scheduler job waits for room
    RUNNING = "running"    # the Dask scheduler was placed; workers come and go as asked
    STOPPING = "stopping"  # deleted, idle, or its owner job ended: its jobs are being cancelled
    STOPPED = "stopped"    # every job of it has ended, as asked
    FAILED = "failed"      # its scheduler was lost; reason says how

    def is_terminal(self) -> bool:
        return self in (ClusterStatus.STOPPED, ClusterStatus.FAILED)


# which status may move to which: one table, checked by the store's compare-and-set
TRANSITIONS: dict[ClusterStatus, tuple[ClusterStatus, ...]] = {
    ClusterStatus.PENDING: (ClusterStatus.RUNNING, ClusterStatus.STOPPING, ClusterStatus.FAILED),
    ClusterStatus.RUNNING: (ClusterStatus.STOPPING, ClusterStatus.FAILED),
    ClusterStatus.STOPPING: (ClusterStatus.STOPPED, ClusterStatus.FAILED),
    ClusterStatus.STOPPED: (),
    ClusterStatus.FAILED: (),
}


def cluster_sources(new: ClusterStatus) -> list[str]:
    """The statuses allowed to move to ``new``."""
    return [old.value for old, targets in TRANSITIONS.items() if new in targets]


class ClusterSpec(Strict):
    """``trainyard cluster create dask …`` / ``new_cluster(...)``."""

    kind: str = Field("dask", description="the kind of cluster; this version has: dask")
    name: str = "dask"
    workers: int = Field(2, ge=0, le=MAX_WORKERS, description="workers to start with")
    worker_cpu: Cores = 1.0
    worker_memory: Bytes | None = Field(None, description="per worker, e.g. 2Gi; also Dask's memory limit")
    worker_gpu: Count = 0
    worker_gpu_type: str | None = None
    scheduler_cpu: Cores = 0.5
    scheduler_memory: Bytes | None = None
    pip: list[PipRequirement] = Field(default_factory=list, description="packages for the workers' and "
                                      "scheduler's virtualenv")
    secrets: dict[str, str] = Field(default_factory=dict, description="the team's secrets in each worker's "
                                    "environment (the credentials its tasks read data with), as a job's `secrets`")
    queue: str = "default"
    idle_timeout: Seconds | None = Field(
        DEFAULT_IDLE_TIMEOUT, description="seconds with no client and no task before it is shut down; 0: never")
    owner_job: str | None = Field(None, description="a job this cluster ends with (set by the SDK inside a job)")
    adapt_min: int | None = Field(None, ge=0, le=MAX_WORKERS)
    adapt_max: int | None = Field(None, ge=1, le=MAX_WORKERS)

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v != "dask":
            raise ValueError(f"unknown cluster kind {v!r}; this version has: dask")
        return v

    @field_validator("name", "queue")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v)  # type: ignore[return-value]

    @field_validator("secrets", mode="before")
    @classmethod
    def _secrets(cls, v: Any) -> Any:
        return job_secrets(v)

    @field_validator("worker_cpu", "scheduler_cpu", mode="before")
    @classmethod
    def _cpu(cls, v: Any) -> float:
        return parse_cpu(v)

    @field_validator("worker_memory", "scheduler_memory", mode="before")
    @classmethod
    def _memory(cls, v: Any) -> int | None:
        return None if v is None else parse_memory(v)

    @field_validator("idle_timeout", mode="before")
    @classmethod
    def _idle(cls, v: Any) -> float | None:
        if v in (None, 0, "0", "never"):
            return None
        return parse_duration(v)

    @model_validator(mode="after")
    def _check(self) -> "ClusterSpec":
        if self.worker_cpu <= 0:
            raise ValueError("worker_cpu must be more than 0: a Dask worker needs a thread")
        if (self.adapt_min is None) != (self.adapt_max is None):
            raise ValueError("adapt_min and adapt_max go together")
        if self.adapt_min is not None and self.adapt_max is not None and self.adapt_min > self.adapt_max:
            raise ValueError(f"adapt_min ({self.adapt_min}) is more than adapt_max ({self.adapt_max})")
        # the same rules as a job's resources (gpu_type without gpu, ...), checked once here
        self.worker_resources()
        return self

    def worker_resources(self) -> Resources:
        return Resources(cpu=self.worker_cpu, memory=self.worker_memory, gpu=self.worker_gpu,
                         gpu_type=self.worker_gpu_type)

    def scheduler_resources(self) -> Resources:
        return Resources(cpu=self.scheduler_cpu, memory=self.scheduler_memory)


class ScaleRequest(BaseModel):
    workers: int = Field(ge=0, le=MAX_WORKERS)


class AdaptRequest(BaseModel):
    minimum: int = Field(ge=0, le=MAX_WORKERS)
    maximum: int = Field(ge=1, le=MAX_WORKERS)

    @model_validator(mode="after")
    def _check(self) -> "AdaptRequest":
        if self.minimum > self.maximum:
            raise ValueError(f"minimum ({self.minimum}) is more than maximum ({self.maximum})")
        return self


class ClusterWorker(BaseModel):
    """One worker job, and where it runs."""

    job_id: str
    status: str
    node: str | None = None
    reason: str | None = None
    address: str | None = Field(None, description="the Dask worker's address, once it joined the scheduler")


class ClusterInfo(BaseModel):
    id: str
    name: str
    kind: str = "dask"
    status: ClusterStatus
    reason: str | None = None
    queue: str
    owner: str | None = Field(None, description="who created it; its jobs are theirs (None: the server itself)")
    team: str | None = None
    spec: Annotated[ClusterSpec, as_stored(ClusterSpec)]
    workers: int = Field(description="workers wanted now (fixed, or the adaptive target within min/max)")
    workers_running: int = Field(0, description="worker jobs running now (in lists too, which carry no worker_jobs)")
    adapt_min: int | None = None
    adapt_max: int | None = None
    scheduler_job: str | None = None
    scheduler_node: str | None = None
    address: str | None = Field(None, description="the Dask scheduler, tls://HOST:PORT (tcp:// for a cluster made "
                                "before clusters had TLS); connect with the credentials of its /tls")
    dashboard: str | None = Field(None, description="the Dask dashboard, a path on the trainyard server")
    worker_jobs: list[ClusterWorker] = Field(default_factory=list)
    owner_job: str | None = None
    created_at: float
    updated_at: float
    ended_at: float | None = None

    @property
    def adaptive(self) -> bool:
        return self.adapt_max is not None


class ClusterTLS(BaseModel):
    """A client's credentials for one cluster's Dask scheduler (mutual TLS): PEM text, never written to a file."""

    ca: str
    cert: str
    key: str

    def security(self):  # noqa: ANN201  (a distributed.security.Security)
        """For ``distributed.Client(address, security=...)``: no plain TCP allowed."""
        from distributed.security import Security

        return Security(tls_ca_file=self.ca, tls_client_cert=self.cert, tls_client_key=self.key,
                        require_encryption=True)
