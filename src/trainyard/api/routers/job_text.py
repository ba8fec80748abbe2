"""A job as plain text, for people and browsers: its spec as YAML and its whole log as a file."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse, StreamingResponse

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.spec.units import INT32_MAX

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

AttemptNo = Annotated[int | None, Query(ge=1, le=INT32_MAX)]
ReplicaNo = Annotated[int | None, Query(ge=0, le=INT32_MAX)]


@router.get("/{job_id}/spec.yaml", response_class=PlainTextResponse)
def spec_yaml(job_id: str, p: PlatformDep, caller: CallerDep) -> PlainTextResponse:
    """The job's spec as YAML that `trainyard run FILE` reads back."""
    return PlainTextResponse(p.jobs.spec_yaml(job_id, caller), media_type="application/yaml; charset=utf-8")


@router.get("/{job_id}/logs.txt", response_class=StreamingResponse)
def logs_txt(job_id: str, p: PlatformDep, caller: CallerDep, attempt: AttemptNo = None,
             replica: ReplicaNo = None) -> StreamingResponse:
    """The whole log (of one attempt or replica, if named) as a download, streamed from the store in
    pages: never cut, whatever its size. Chunks of several replicas come in the order they arrived."""
    pages = p.jobs.log_text(job_id, attempt=attempt, replica=replica, caller=caller)
    name = "-".join([job_id] + [f"{k}{v}" for k, v in (("attempt", attempt), ("replica", replica)) if v is not None])
    return StreamingResponse((page.encode("utf-8") for page in pages), media_type="text/plain; charset=utf-8",
                             headers={"Content-Disposition": f'attachment; filename="{name}.log"'})
