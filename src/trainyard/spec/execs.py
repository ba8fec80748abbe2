"""A command run beside a running job's command, on its node (``trainyard exec``, ``POST /jobs/{id}/exec``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from trainyard.spec.job import MAX_REPLICAS

MAX_EXEC_TIMEOUT = 600.0  # seconds; longer work is a job of its own
# an argument as execve takes it: no NUL (it would end the string); bounded, as the whole is a row
Arg = Annotated[str, Field(max_length=4096, pattern=r"^[^\x00]*$")]
ExecStatus = Literal["pending", "done", "failed", "expired"]


class ExecRequest(BaseModel):
    """``argv`` run in replica ``replica``'s work dir, with its command's environment and account (in its
    container, for a job in an image), for at most ``timeout`` seconds; no shell, no standard input."""

    model_config = ConfigDict(extra="forbid")
    argv: list[Arg] = Field(min_length=1, max_length=64)
    replica: int = Field(0, ge=0, lt=MAX_REPLICAS, strict=True)
    timeout: float = Field(30.0, ge=1.0, le=MAX_EXEC_TIMEOUT, allow_inf_nan=False)

    @field_validator("argv")
    @classmethod
    def _program(cls, argv: list[str]) -> list[str]:
        if not argv[0]:
            raise ValueError("the program (the first argument) is empty")
        return argv


class ExecResult(BaseModel):
    """What the command did: ``exit_code`` and ``output`` (standard output and error as they came, the first
    250 KiB) once "done"; "failed" with ``error`` when it could not run or ran past its timeout; "expired"
    when the launcher never answered (the replica ended)."""

    id: int
    job_id: str
    attempt_id: str
    replica: int
    node: str | None = None
    status: ExecStatus
    argv: list[str]
    timeout: float
    requested_at: float
    requested_by: str | None = None
    answered_at: float | None = None
    exit_code: int | None = None
    output: str = ""
    error: str | None = None
