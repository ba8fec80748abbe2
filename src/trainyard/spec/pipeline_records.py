"""What the API returns about pipeline runs, their steps and step artifacts.

Shared by the store (rows → records), the API and the SDK, like
:mod:`trainyard.spec.records` for jobs.
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, Field


class RunStatus(str, enum.Enum):
    RUNNING = "running"        # steps run as soon as what they need has succeeded
    CANCELLING = "cancelling"  # cancel asked; waiting for the steps' jobs to stop
    SUCCEEDED = "succeeded"    # final: every step succeeded or was cached
    FAILED = "failed"          # final until retried: a step failed, nothing else can run
    CANCELLED = "cancelled"    # final until retried

    def is_terminal(self) -> bool:
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class StepStatus(str, enum.Enum):
    WAITING = "waiting"        # for the steps it needs
    SUBMITTED = "submitted"    # its job is live; shown as the job's status (pending, running...)
    SUCCEEDED = "succeeded"
    CACHED = "cached"          # an earlier step hashed the same: its outputs are reused, nothing ran
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"        # something it needs failed or was cancelled

    def is_done(self) -> bool:
        return self in (StepStatus.SUCCEEDED, StepStatus.CACHED)


# what a run's steps may move from, per target (the runner's compare-and-set)
STEP_SOURCES: dict[StepStatus, tuple[StepStatus, ...]] = {
    StepStatus.SUBMITTED: (StepStatus.WAITING,),
    StepStatus.CACHED: (StepStatus.WAITING,),
    StepStatus.SKIPPED: (StepStatus.WAITING,),
    StepStatus.SUCCEEDED: (StepStatus.SUBMITTED,),
    StepStatus.FAILED: (StepStatus.WAITING, StepStatus.SUBMITTED),
    StepStatus.CANCELLED: (StepStatus.WAITING, StepStatus.SUBMITTED),
    StepStatus.WAITING: (StepStatus.FAILED, StepStatus.CANCELLED, StepStatus.SKIPPED),  # retry
}
RUN_SOURCES: dict[RunStatus, tuple[RunStatus, ...]] = {
    RunStatus.CANCELLING: (RunStatus.RUNNING,),
    RunStatus.SUCCEEDED: (RunStatus.RUNNING,),
    RunStatus.FAILED: (RunStatus.RUNNING,),
    RunStatus.CANCELLED: (RunStatus.RUNNING, RunStatus.CANCELLING),
    RunStatus.RUNNING: (RunStatus.FAILED, RunStatus.CANCELLED),  # retry
}


class StepInfo(BaseModel):
    name: str = Field(description="the job name: the step, or step-N for item N of a foreach step")
    step: str
    index: int | None = None
    item: Any = None
    status: str = Field(description="waiting, pending, starting, running, cancelling, succeeded, cached, "
                                    "failed, cancelled or skipped")
    state: StepStatus = Field(StepStatus.WAITING, description="the step's own status; a live job is 'submitted'")
    job_id: str | None = None
    jobs: list[str] = Field(default_factory=list, description="earlier jobs of this step, before retries")
    needs: list[str] = Field(default_factory=list)
    inputs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    outputs: list[str] = Field(default_factory=list)
    artifacts: dict[str, str] = Field(default_factory=dict, description="output name -> artifact id")
    cache: bool = True
    cache_key: str | None = None
    cached_from: str | None = Field(None, description="the job whose outputs a cached step reuses")
    reason: str | None = None
    workdir: str = "."
    job: dict[str, Any] = Field(default_factory=dict, description="the job spec the step runs as")
    started_at: float | None = None
    ended_at: float | None = None


class PipelineRunInfo(BaseModel):
    id: str
    name: str
    status: RunStatus
    params: dict[str, Any] = Field(default_factory=dict)
    spec: dict[str, Any] = Field(default_factory=dict)
    workdirs: dict[str, str] = Field(default_factory=dict)
    source: str | None = None
    warnings: list[str] = Field(default_factory=list)
    retries: int = 0
    reason: str | None = None
    created_at: float
    updated_at: float
    ended_at: float | None = None
    owner: str | None = None
    team: str | None = None
    steps: list[StepInfo] = Field(default_factory=list)

    def step(self, name: str) -> StepInfo:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(name)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps:
            out[s.status] = out.get(s.status, 0) + 1
        return out


class PipelineRunPage(BaseModel):
    items: list[PipelineRunInfo]
    next_cursor: str | None = None


class PipelineArtifact(BaseModel):
    """A step's named output, by content hash, and what produced it."""

    id: str
    digest: str
    run_id: str
    step: str
    job_id: str
    attempt: int
    output: str
    url: str
    size: int
    files: int
    inputs: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                              description="input name -> {digest, artifacts, url}")
    code: str | None = Field(None, description="the code snapshot's digest")
    cache_key: str | None = None
    created_at: float
    used_by: list[str] = Field(default_factory=list, description="runs/steps that reused it from the cache")
