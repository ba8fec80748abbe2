"""A running job's stacks: ask its launchers for a dump, read the dumps (:mod:`trainyard.services.stacks`)."""

from __future__ import annotations

from fastapi import APIRouter

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.spec.stacks import StackDump, StackRequest

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])


@router.post("/{job_id}/stacks", status_code=202)
def request_stacks(job_id: str, p: PlatformDep, caller: CallerDep, req: StackRequest | None = None) -> list[StackDump]:
    """Ask each running replica (or ``replica``) for the stacks of its command's Python processes. Answers
    at once with the requests, "pending"; poll ``GET .../stacks`` for the text (a launcher answers in ~3 s).
    Needs the right to cancel the job: a dump pauses each process for a moment."""
    return p.stacks.request(job_id, req or StackRequest(), caller)


@router.get("/{job_id}/stacks")
def stacks(job_id: str, p: PlatformDep, caller: CallerDep) -> list[StackDump]:
    """The job's kept dumps (the newest 20), newest first."""
    return p.stacks.of_job(job_id, caller)
