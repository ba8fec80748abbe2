"""/api/v1/jobs: thin; every rule lives in services/jobs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel
from sse_starlette import EventSourceResponse, ServerSentEvent

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.errors import RangeNotSatisfiable
from trainyard.services.jobs import KEEP_ALIVE, LogEnd, LogEvent
from trainyard.spec.job import JobSpec
from trainyard.spec.records import CURSOR_PATTERN, ArtifactInfo, Digest, JobInfo, JobPage, LogChunk, MetricPoint
from trainyard.spec.units import INT32_MAX

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

INT64_MAX = 2**63 - 1  # log chunk ids are BIGINT
Timeout = Annotated[float, Query(ge=0, le=300)]
After = Annotated[int, Query(ge=0, le=INT64_MAX, description="cursor of the page before")]
AttemptNo = Annotated[int | None, Query(ge=1, le=INT32_MAX)]
ReplicaNo = Annotated[int | None, Query(ge=0, le=INT32_MAX)]


class SubmitRequest(BaseModel):
    spec: JobSpec
    snapshot: Digest | None = None


class LogPage(BaseModel):
    chunks: list[LogChunk]
    cursor: int


def _json(text: str, status_code: int = 200) -> Response:
    # serialized by the service: FastAPI would validate the model (and its spec) again, holding the GIL
    # while the scheduler admits this very job
    return Response(text, status_code=status_code, media_type="application/json")


@router.post("", status_code=201, response_model=JobInfo)
def submit(body: SubmitRequest, p: PlatformDep, caller: CallerDep) -> Response:
    return _json(p.jobs.submit(body.spec, body.snapshot, caller).model_dump_json(), 201)


@router.get("", response_model=JobPage)
def list_jobs(
    p: PlatformDep,
    caller: CallerDep,
    status: Annotated[list[str] | None, Query()] = None,
    name: str | None = None,
    queue: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN, description="next_cursor of the page before")] = None,
    since: Annotated[float | None, Query(ge=0, le=2**53, description="only jobs submitted at or after this Unix time")]
    = None,
) -> Response:
    return _json(p.jobs.list_json(status=status, name=name, queue=queue, limit=limit, cursor=cursor, since=since,
                                  caller=caller))


@router.get("/{job_id}", response_model=JobInfo)
async def get_job(job_id: str, p: PlatformDep, caller: CallerDep) -> Response:
    return _json(await p.jobs.read(job_id, caller))


@router.get("/{job_id}/wait", response_model=JobInfo)
async def wait_job(job_id: str, p: PlatformDep, caller: CallerDep, timeout: Timeout = 30) -> Response:
    """The job once it has ended, or as it is after ``timeout`` seconds."""
    return _json(await p.jobs.wait(job_id, timeout, caller))


@router.post("/{job_id}/cancel")
def cancel(job_id: str, p: PlatformDep, caller: CallerDep) -> JobInfo:
    return p.jobs.cancel(job_id, caller)


@router.get("/{job_id}/logs", response_model=None)
def logs(job_id: str, p: PlatformDep, caller: CallerDep, after: After = 0, attempt: AttemptNo = None, replica: ReplicaNo = None,
         follow: bool = False) -> LogPage | EventSourceResponse:
    """Log chunks after cursor ``after``; with ``follow``, a server-sent event stream until the job ends."""
    if not follow:
        chunks, cursor = p.jobs.logs(job_id, after=after, attempt=attempt, replica=replica, caller=caller)
        return LogPage(chunks=chunks, cursor=cursor)
    events = p.jobs.follow(job_id, after=after, attempt=attempt, replica=replica, caller=caller)
    # the framing is sse-starlette's; "\n" and a "keep-alive" comment as clients have always seen
    return EventSourceResponse(_sse(events), sep="\n", ping=KEEP_ALIVE, headers={"Cache-Control": "no-cache"},
                               ping_message_factory=lambda: ServerSentEvent(comment="keep-alive", sep="\n"))


async def _sse(events: AsyncIterator[LogEvent | LogEnd]) -> AsyncIterator[ServerSentEvent | bytes]:
    async for e in events:
        if isinstance(e, LogEnd):
            yield ServerSentEvent(json.dumps({"status": e.status.value}), event="end", sep="\n")
        else:
            # framed here, not by ServerSentEvent (its encode is ~20x slower): a chunk is one line of
            # JSON, so this is the same frame, and a fast log stream stays as fast as before
            yield f"id: {e.cursor}\ndata: {e.chunk}\n\n".encode()


@router.get("/{job_id}/metrics")
def metrics(job_id: str, p: PlatformDep, caller: CallerDep,
            system: bool = Query(False, description="also the launcher's system/… resource samples")) -> list[MetricPoint]:
    return p.jobs.metrics(job_id, caller, system)


@router.get("/{job_id}/outputs")
def outputs(job_id: str, p: PlatformDep, caller: CallerDep) -> list[ArtifactInfo]:
    return p.jobs.outputs(job_id, caller)


@router.get("/{job_id}/outputs/{path:path}")
def output_file(job_id: str, path: str, p: PlatformDep, caller: CallerDep,
                range_: Annotated[str | None, Header(alias="Range")] = None) -> Response:
    """The file, or with ``Range: bytes=N-`` its rest (``206``, ``Content-Range``): a download resumes.
    ``X-Digest`` is always the whole file's, for the client to check once it has all of it."""
    try:
        info, part, body = p.jobs.open_output(job_id, path, caller, range_)
    except RangeNotSatisfiable as e:
        return JSONResponse(e.to_dict(), status_code=e.http_status,
                            headers={"Content-Range": f"bytes */{e.details['size']}"})
    headers = {"X-Digest": info.digest, "Accept-Ranges": "bytes"}
    if part is None:
        return StreamingResponse(body, media_type="application/octet-stream",
                                 headers={**headers, "Content-Length": str(info.size)})
    first, last = part
    return StreamingResponse(body, status_code=206, media_type="application/octet-stream", headers={
        **headers, "Content-Length": str(last - first + 1), "Content-Range": f"bytes {first}-{last}/{info.size}"})
