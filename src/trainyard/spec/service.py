"""Services: long-running jobs with a port, reached through the server at ``/serve/NAME``.

A service spec is a job spec with a ``service:`` block (or ``kind: service``).
Each replica is one ordinary job in the service's queue, placed by the
scheduler like any job; the server keeps the wanted number of them (fixed, or
scaled on concurrency), restarts crashed ones and rolls out a changed spec
replica by replica. These models are shared by the API, the SDK and the store.
"""

from __future__ import annotations

import math
import re
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from trainyard.spec.job import JobSpec, Strict
from trainyard.spec.labels import room_for_own
from trainyard.spec.units import Seconds, parse_duration
from trainyard.spec.submitted import STORED, as_stored, submitting

MAX_SERVICE_REPLICAS = 100  # each replica is a job the scheduler plans and the server probes every period
DEFAULT_COLD_START_TIMEOUT = 60.0


class ServiceStatus(str, Enum):
    RUNNING = "running"    # live: the server keeps its replicas at what is wanted (which may be 0)
    STOPPING = "stopping"  # deleted: its replica jobs are being cancelled
    STOPPED = "stopped"    # every replica job has ended

    def is_terminal(self) -> bool:
        return self == ServiceStatus.STOPPED


TRANSITIONS: dict[ServiceStatus, tuple[ServiceStatus, ...]] = {
    ServiceStatus.RUNNING: (ServiceStatus.STOPPING,),
    ServiceStatus.STOPPING: (ServiceStatus.STOPPED,),
    ServiceStatus.STOPPED: (),
}


def service_sources(new: ServiceStatus) -> list[str]:
    """The statuses allowed to move to ``new``."""
    return [old.value for old, targets in TRANSITIONS.items() if new in targets]


def _duration(v: Any) -> float:
    return parse_duration(v)


class Readiness(Strict):
    """How the server tells that a replica may receive traffic: an HTTP GET answering 2xx."""

    path: str = Field("/", description="HTTP path probed on the replica, e.g. /healthz")
    initial_delay: Seconds = Field(0.0, description="seconds after the replica starts before the first probe")
    period: Seconds = Field(1.0, description="seconds between probes")
    timeout: Seconds = Field(1.0, description="seconds one probe may take")

    @field_validator("initial_delay", mode="before")
    @classmethod
    def _delay(cls, v: Any) -> float:
        zero = v == 0 or (isinstance(v, str) and re.fullmatch(r"\s*0+(\.0*)?\s*[smhd]?\s*", v) is not None)
        return 0.0 if zero else parse_duration(v)

    @field_validator("period", "timeout", mode="before")
    @classmethod
    def _positive(cls, v: Any) -> float:
        seconds = parse_duration(v)
        if seconds > 3600:
            raise ValueError("must be at most 1h")
        return seconds

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("/") or any(c in v for c in " \r\n#") or len(v) > 1024:
            raise ValueError("an absolute HTTP path such as /healthz (no spaces, at most 1024 characters)")
        return v


class Autoscale(Strict):
    """Replicas follow concurrency: ``ceil(requests in flight / target_concurrency)`` within [min, max]."""

    min: int = Field(0, ge=0, le=MAX_SERVICE_REPLICAS, description="0: no replica while idle (cold start)")
    max: int = Field(4, ge=1, le=MAX_SERVICE_REPLICAS)
    target_concurrency: float = Field(8.0, gt=0, le=100_000, allow_inf_nan=False,
                                      description="requests in flight one replica is meant to hold")
    scale_down_after: Seconds = Field(300.0, description="idle time (no request) before replicas go down to min")

    @field_validator("scale_down_after", mode="before")
    @classmethod
    def _after(cls, v: Any) -> float:
        return _duration(v)

    @model_validator(mode="after")
    def _check(self) -> "Autoscale":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is more than max ({self.max})")
        return self

    def wanted(self, in_flight: float) -> int:
        return max(self.min, min(self.max, math.ceil(in_flight / self.target_concurrency)))


class ServiceConfig(Strict):
    """The ``service:`` block."""

    port: int | None = Field(None, ge=1, le=65535, description=(
        "the port the replica listens on; leave out to have the server pick a free one per replica, given as "
        "$TRAINYARD_SERVICE_PORT, $PORT and {{port}} in the command"))
    readiness: Readiness = Field(default_factory=Readiness)
    replicas: int | None = Field(None, ge=0, le=MAX_SERVICE_REPLICAS, description="a fixed number of replicas")
    autoscale: Autoscale | None = None
    cold_start_timeout: Seconds = Field(DEFAULT_COLD_START_TIMEOUT, description=(
        "how long a request waits for a first ready replica before 503 with Retry-After"))

    @field_validator("cold_start_timeout", mode="before")
    @classmethod
    def _timeout(cls, v: Any) -> float:
        return _duration(v)

    @model_validator(mode="after")
    def _check(self) -> "ServiceConfig":
        if self.replicas is not None and self.autoscale is not None:
            raise ValueError("give replicas or autoscale, not both")
        if self.replicas is None and self.autoscale is None:
            self.replicas = 1
        return self


class ServiceSpec(JobSpec):
    """A job spec that runs as a service: ``trainyard service apply svc.yaml``."""

    kind: Literal["service"] | None = Field(None, description="service (implied by a service: block)")
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    # a replica holds live state (loaded model, open connections): stopping it for other work is opt-in
    preemptible: bool = Field(False, description="whether higher-priority work may stop a replica (it is restarted)")

    @field_validator("replicas", mode="before")
    @classmethod
    def _replicas_where(cls, v: Any) -> Any:
        if v not in (None, 1):
            raise ValueError("a service's replicas go under service.replicas (top-level replicas is the gang size "
                             "of a distributed job)")
        return 1 if v is None else v

    @field_validator("labels")
    @classmethod
    def _room(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        room_for_own(v, 2, "each replica also gets trainyard.io/service and trainyard.io/service-version",
                     submitting(info))
        return v

    def job_spec(self) -> JobSpec:
        """The spec each replica job runs (before its port and inputs are filled in)."""
        return JobSpec.model_validate(self.model_dump(exclude={"kind", "service"}), context=STORED)

    @property
    def fixed(self) -> bool:
        return self.service.autoscale is None


def is_service_data(data: Any) -> bool:
    """Whether parsed YAML asks for a service (``kind: service`` or a ``service:`` block)."""
    return isinstance(data, dict) and (data.get("kind") == "service" or "service" in data)


class ApplyRequest(BaseModel):
    spec: ServiceSpec
    snapshot: str | None = Field(None, pattern=r"^sha256:[0-9a-f]{64}$")


class ScaleRequest(BaseModel):
    """A fixed number of replicas, or autoscaling settings (the fields of autoscale not given stay)."""

    replicas: int | None = Field(None, ge=0, le=MAX_SERVICE_REPLICAS)
    min: int | None = Field(None, ge=0, le=MAX_SERVICE_REPLICAS)
    max: int | None = Field(None, ge=1, le=MAX_SERVICE_REPLICAS)
    target_concurrency: float | None = Field(None, gt=0, le=100_000, allow_inf_nan=False)
    scale_down_after: float | str | None = Field(None, description="seconds, or a duration such as 90s or 5m")

    @field_validator("scale_down_after", mode="before")
    @classmethod
    def _after(cls, v: Any) -> float | None:
        return None if v is None else _duration(v)

    def autoscale(self) -> dict[str, Any]:
        """The autoscale fields this request sets."""
        return {k: v for k in ("min", "max", "target_concurrency", "scale_down_after")
                if (v := getattr(self, k)) is not None}

    @model_validator(mode="after")
    def _check(self) -> "ScaleRequest":
        if (self.replicas is None) == (not self.autoscale()):
            raise ValueError("give replicas, or autoscale settings (min, max, target_concurrency, scale_down_after)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is more than max ({self.max})")
        return self


class ServiceReplica(BaseModel):
    job_id: str
    version: int = Field(description="the service version this replica runs")
    status: str = Field(description="its job's status")
    ready: bool = Field(description="answered its readiness probe last time: it receives traffic")
    draining: bool = Field(False, description="taken out of traffic, to be stopped (rollout, scale down)")
    address: str | None = Field(None, description="HOST:PORT it listens on, once launched")
    node: str | None = None
    reason: str | None = None


class ServiceTraffic(BaseModel):
    """What this server's proxy saw since it started (each server counts its own)."""

    requests: int = 0
    errors: int = Field(0, description="answers of 5xx, from a replica or from the proxy (none ready, unreachable)")
    in_flight: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    last_request_at: float | None = None


class ServiceInfo(BaseModel):
    id: str
    name: str
    status: ServiceStatus
    reason: str | None = None
    queue: str
    owner: str | None = None
    team: str | None = None
    version: int = Field(description="bumped by each apply of a changed spec; replicas of older ones are rolled out")
    spec: Annotated[ServiceSpec, as_stored(ServiceSpec)]
    wanted: int = Field(description="replicas wanted now (fixed, or the autoscaler's choice within min/max)")
    ready: int = 0
    restarts: int = Field(0, description="crashed replicas replaced since the service was created")
    url: str = Field(description="its address on this server: /serve/NAME/")
    replicas: list[ServiceReplica] = Field(default_factory=list)
    traffic: ServiceTraffic = Field(default_factory=ServiceTraffic)
    created_at: float
    updated_at: float
    ended_at: float | None = None
