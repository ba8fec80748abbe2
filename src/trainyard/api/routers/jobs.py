"""/api/v1/jobs: thin; every rule lives in services."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from trainyard.api.deps import PlatformDep
from trainyard.spec.job import JobSpec
from trainyard.spec.records import CURSOR_PATTERN, ArtifactInfo, Digest, JobInfo, JobPage, LogChunk, MetricPoint
from trainyard.spec.units import INT32_MAX

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

INT64_MAX = 2**63 - 1  # log chunk ids are BIGINT


class SubmitRequest(BaseModel):
    spec: JobSpec
    snapshot: Digest | None = None


class LogPage(BaseModel):
    chunks: list[LogChunk]
    cursor: int


@router.post("", status_code=201, response_model=JobInfo)
def submit(body: SubmitRequest, p: PlatformDep) -> Response:
    job = p.jobs.submit(body.spec, body.snapshot)
    # serialized here: FastAPI would validate the model (and its spec) again, holding the GIL while
    # the scheduler admits this very job
    return Response(job.model_dump_json(), status_code=201, media_type="application/json")


@router.get("")
def list_jobs(
    p: PlatformDep,
    status: Annotated[list[str] | None, Query()] = None,
    name: str | None = None,
    queue: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN, description="next_cursor of the page before")] = None,
) -> JobPage:
    return p.store.list_jobs(status=status, name=name, queue=queue, limit=limit, cursor=cursor)


@router.get("/{job_id}")
def get_job(job_id: str, p: PlatformDep) -> JobInfo:
    return p.store.get_job(job_id)


@router.get("/{job_id}/wait", response_model=JobInfo)
async def wait_job(job_id: str, p: PlatformDep, timeout: Annotated[float, Query(ge=0, le=300)] = 30) -> Response:
    """The job once it has ended, or as it is after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    seen = p.notifier.version(job_id)
    while True:
        job = await run_in_threadpool(p.store.get_job, job_id)
        left = deadline - loop.time()
        if job.status.is_terminal() or left <= 0:
            # serialized here: FastAPI would validate the model again on the way out
            return Response(job.model_dump_json(), media_type="application/json")
        await p.notifier.wait(job_id, seen, left)
        if (final := p.notifier.final(job_id, seen)) is not None:  # it ended: no need to read it back
            return Response(final, media_type="application/json")
        seen = p.notifier.version(job_id)


@router.post("/{job_id}/cancel")
def cancel(job_id: str, p: PlatformDep) -> JobInfo:
    return p.jobs.cancel(job_id)


@router.get("/{job_id}/logs", response_model=None)
def logs(
    job_id: str, p: PlatformDep,
    after: Annotated[int, Query(ge=0, le=INT64_MAX, description="cursor of the page before")] = 0,
    attempt: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
    replica: Annotated[int | None, Query(ge=0, le=INT32_MAX)] = None,
    follow: bool = False,
) -> LogPage | StreamingResponse:
    """Log chunks after cursor ``after``; with ``follow``, a server-sent event stream until the job ends."""
    p.store.get_job(job_id)
    if not follow:
        chunks, cursor = p.store.read_logs(job_id, after=after, attempt=attempt, replica=replica)
        return LogPage(chunks=chunks, cursor=cursor)
    return StreamingResponse(_follow(p, job_id, after, attempt, replica), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _follow(p: Any, job_id: str, after: int, attempt: int | None, replica: int | None):
    cursor = after
    while True:
        seen = p.notifier.version(job_id)
        chunks, cursor = await run_in_threadpool(p.store.read_logs, job_id, after=cursor, attempt=attempt,
                                                 replica=replica)
        for c in chunks:
            yield f"id: {cursor}\ndata: {c.model_dump_json()}\n\n"
        if chunks:
            continue
        job = await run_in_threadpool(p.store.get_job, job_id)
        if job.status.is_terminal():
            yield f"event: end\ndata: {json.dumps({'status': job.status.value})}\n\n"
            return
        await p.notifier.wait(job_id, seen, 5.0)
        if p.notifier.version(job_id) == seen:
            yield ": keep-alive\n\n"


@router.get("/{job_id}/metrics")
def metrics(job_id: str, p: PlatformDep) -> list[MetricPoint]:
    p.store.get_job(job_id)
    return p.store.metrics(job_id)


@router.get("/{job_id}/outputs")
def outputs(job_id: str, p: PlatformDep) -> list[ArtifactInfo]:
    p.store.get_job(job_id)
    return [info for info, _ in p.store.artifacts(job_id)]


@router.get("/{job_id}/outputs/{path:path}")
def output_file(job_id: str, path: str, p: PlatformDep) -> StreamingResponse:
    info, url = p.jobs.output(job_id, path)
    return StreamingResponse(p.artifacts.iter_bytes(url), media_type="application/octet-stream",
                             headers={"Content-Length": str(info.size), "X-Digest": info.digest})
