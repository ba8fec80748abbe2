"""A running job's stacks, as its launchers dump them (``trainyard stack``, ``POST /jobs/{id}/stacks``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trainyard.spec.job import MAX_REPLICAS

StackStatus = Literal["pending", "done", "failed", "expired"]


class StackRequest(BaseModel):
    """What to dump: one replica of the running attempt, or (``replica`` left out) each of them."""

    model_config = ConfigDict(extra="forbid")
    replica: int | None = Field(None, ge=0, lt=MAX_REPLICAS, strict=True)
    locals: bool = Field(False, strict=True, description="each frame's local variables too (py-spy --locals)")
    native: bool = Field(False, strict=True, description="C and C++ frames too, e.g. inside NCCL (py-spy --native)")


class StackDump(BaseModel):
    """One replica's dump: asked for at ``requested_at``, answered by its launcher (``status`` "done", or
    "failed" with ``error`` saying why) or never ("expired": the replica ended or its launcher is too old)."""

    id: int
    job_id: str
    attempt_id: str
    replica: int
    node: str | None = None
    status: StackStatus
    requested_at: float
    requested_by: str | None = None
    locals: bool = False
    native: bool = False
    answered_at: float | None = None
    text: str = Field("", description="py-spy's dump of each Python process the replica's command runs")
    error: str | None = None
