"""What a running job's launchers are asked to do on their nodes: dump the command's stacks, run a command beside
it (:mod:`trainyard.services.replica_requests`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.spec.execs import ExecRequest, ExecResult
from trainyard.spec.stacks import StackDump, StackRequest

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])


@router.post("/{job_id}/stacks", status_code=202)
def request_stacks(job_id: str, p: PlatformDep, caller: CallerDep, req: StackRequest | None = None) -> list[StackDump]:
    """Ask each running replica (or ``replica``) for the stacks of its command's Python processes. Answers
    at once with the requests, "pending"; poll ``GET .../stacks`` for the text (a launcher answers in ~3 s).
    Needs the right to cancel the job: a dump pauses each process for a moment."""
    return p.replica_requests.request_stacks(job_id, req or StackRequest(), caller)


@router.get("/{job_id}/stacks")
def stacks(job_id: str, p: PlatformDep, caller: CallerDep) -> list[StackDump]:
    """The job's kept dumps (the newest 20), newest first."""
    return p.replica_requests.stacks_of(job_id, caller)


@router.post("/{job_id}/exec", status_code=202)
def request_exec(job_id: str, req: ExecRequest, p: PlatformDep, caller: CallerDep) -> ExecResult:
    """Run ``argv`` beside replica ``replica``'s command, on its node: in its work dir, with its environment,
    account and container. Answers at once, "pending"; poll ``GET .../exec/{id}`` for the exit code and
    output (a launcher picks it up within ~3 s). Needs the right to cancel the job."""
    return p.replica_requests.request_exec(job_id, req, caller)


@router.get("/{job_id}/exec/{exec_id}")
def exec_result(job_id: str, exec_id: Annotated[int, Path(ge=1, le=2**63 - 1)], p: PlatformDep,
                caller: CallerDep) -> ExecResult:
    """One command run with ``POST .../exec`` (the job keeps its newest 20)."""
    return p.replica_requests.exec_of(job_id, exec_id, caller)
