"""/api/v1/jobs: thin; every rule lives in services/jobs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field, TypeAdapter
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from trainyard.api import lean
from trainyard.api.deps import CallerDep, PlatformDep, get_caller
from trainyard.api.spec_text import SOURCE, SpecCheck, is_yaml, read_json, read_text, with_lines, yaml_body
from trainyard.auth.permissions import Caller
from trainyard.errors import InvalidSpec, RangeNotSatisfiable, TrainyardError
from trainyard.services.platform import Platform
from trainyard.services.jobs import KEEP_ALIVE, LogCut, LogEnd, LogEvent
from trainyard.spec.job import JobSpec
from trainyard.spec.job_query import TOTAL_CAP, JobFilter, JobSort
from trainyard.spec.label_selector import SelectorError, parse_selector
from trainyard.spec.labels import MAX_LABELS, LabelChange, LabelsNow, not_own
from trainyard.spec.loader import parse_job_text
from trainyard.spec.choices import LOG_TAIL_MAX
from trainyard.spec.records import CURSOR_PATTERN, ArtifactInfo, Digest, JobInfo, JobPage, LogChunk, MetricPoint
from trainyard.spec.units import INT32_MAX
from trainyard.status import JobStatus

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

INT64_MAX = 2**63 - 1  # log chunk ids are BIGINT
After = Annotated[int, Query(ge=0, le=INT64_MAX, description="cursor of the page before")]
AttemptNo = Annotated[int | None, Query(ge=1, le=INT32_MAX)]
ReplicaNo = Annotated[int | None, Query(ge=0, le=INT32_MAX)]
Tail = Annotated[int | None, Query(ge=0, le=LOG_TAIL_MAX, description="only the last N lines")]
Cuts = Annotated[bool, Query(description="following: also where a log past log_keep dropped bytes (event: cut)")]


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


_DRY_RUN = TypeAdapter(bool)
_SUBMIT_PARAMETERS = [{**lean.parameter("dry_run", "query", _DRY_RUN, required=False),
                       "description": "check everything, submit nothing"}]


@router.post("", status_code=201, response_model=JobInfo,
             openapi_extra={**yaml_body(SubmitRequest), **lean.documented(_SUBMIT_PARAMETERS)},
             responses={200: {"model": SpecCheck, "description": "dry_run: the spec would be accepted"}})
async def submit(request: Request) -> Response:
    """A job as JSON (``{spec, snapshot}``), or its spec as YAML text (``Content-Type: application/yaml``),
    whose errors name the text's lines.

    Lean (:mod:`trainyard.api.lean`): the first of a job's three requests."""
    dry_run = lean.checked(_DRY_RUN, request.query_params.get("dry_run", False), "query", "dry_run")
    p: Platform = request.app.state.platform
    caller = await get_caller(request)
    if not is_yaml(request):
        body = await read_json(request, SubmitRequest)
        return await run_in_threadpool(_submit, p, caller, body.spec, body.snapshot, dry_run)
    text = await read_text(request)
    try:
        return await run_in_threadpool(_submit, p, caller, None, None, dry_run, text)
    except TrainyardError as e:
        raise with_lines(e, text) from None


def _submit(p: Platform, caller: Caller, spec: JobSpec | None, snapshot: str | None, dry_run: bool,
            text: str | None = None) -> Response:
    if spec is None:
        spec = parse_job_text(text or "", SOURCE)
    if (why := not_own(spec.labels)) is not None:
        raise InvalidSpec(errors=[{"field": "labels", "line": None, "where": "labels", "message": why}])
    p.snapshots.check_use(caller, snapshot)
    if dry_run:
        p.jobs.dry_run(spec, snapshot, caller)
        return _json(SpecCheck(kind="job", name=spec.name).model_dump_json())
    return _json(p.jobs.submit(spec, snapshot, caller).model_dump_json(), 201)


Time = Annotated[float | None, Query(ge=0, le=2**53)]
PRINTABLE = r"^[^\x00-\x1f\x7f]+$"  # no control characters: PostgreSQL refuses a NUL in any string
Word = Annotated[str | None, Query(min_length=1, max_length=63, pattern=PRINTABLE)]


async def job_filter(  # async: no I/O, and a plain function would be run in a worker thread
    status: Annotated[list[JobStatus] | None, Query(description="any of these statuses")] = None,
    queue: Word = None, team: Word = None, owner: Word = None, name: Annotated[Word, Query(description="exactly")] = None,
    q: Annotated[str | None, Query(min_length=1, max_length=100, pattern=PRINTABLE,
                                   description="part of the name, or the id's start")] = None,
    since: Annotated[Time, Query(description="submitted at or after this Unix time")] = None,
    until: Annotated[Time, Query(description="submitted before this Unix time")] = None,
    label: Annotated[list[str] | None, Query(max_length=MAX_LABELS, description="a label selector: key=value, "
                                             "key!=value, key in (a,b), key notin (a,b), key, !key, several "
                                             "separated by commas (repeated: all of them)")] = None,
) -> JobFilter:
    try:
        labels = parse_selector(label or [], "label")
    except SelectorError as e:  # its text starts with the field, which the error names already
        raise InvalidSpec.parameter("label", e.problem) from None
    return JobFilter(status=tuple(s.value for s in status or ()), queue=queue, team=team, owner=owner, name=name,
                     q=q, since=since, until=until, labels=labels)


FilterDep = Annotated[JobFilter, Depends(job_filter)]


@router.get("", response_model=JobPage)
async def list_jobs(
    p: PlatformDep,
    caller: CallerDep,
    where: FilterDep,
    sort: JobSort = "-created",
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN, description="next_cursor of the page before")] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000, description="jobs to skip (pages of any sort)")] = 0,
    count: Annotated[bool, Query(description=f"also count the matching jobs (up to {TOTAL_CAP:,})")] = False,
) -> Response:
    page = await p.jobs.page_json(where, sort=sort, limit=limit, cursor=cursor, offset=offset, count=count,
                                  caller=caller)
    return _json(page)


@router.get("/counts")
def job_counts(p: PlatformDep, caller: CallerDep, where: FilterDep) -> dict[str, int]:
    """The jobs the caller may see in each status, under the listing's filters: cheap enough to poll."""
    return p.jobs.counts(where, caller)


@router.get("/{job_id}", response_model=JobInfo)
async def get_job(job_id: str, p: PlatformDep, caller: CallerDep) -> Response:
    return _json(await p.jobs.read(job_id, caller))


_TIMEOUT = TypeAdapter(Annotated[float, Field(ge=0, le=300)])


@router.get("/{job_id}/wait", response_model=JobInfo, openapi_extra=lean.documented([
    lean.parameter("job_id", "path", TypeAdapter(str)), lean.parameter("timeout", "query", _TIMEOUT, required=False)]))
async def wait_job(request: Request) -> Response:
    """The job once it has ended, or as it is after ``timeout`` seconds (default 30).

    Lean (:mod:`trainyard.api.lean`): every client waits for each of its jobs."""
    timeout = lean.checked(_TIMEOUT, request.query_params.get("timeout", 30), "query", "timeout")
    p: Platform = request.app.state.platform
    return _json(await p.jobs.wait(request.path_params["job_id"], timeout, await get_caller(request)))


@router.post("/{job_id}/cancel")
def cancel(job_id: str, p: PlatformDep, caller: CallerDep) -> JobInfo:
    return p.jobs.cancel(job_id, caller)


@router.patch("/{job_id}/labels")
def relabel(job_id: str, change: LabelChange, p: PlatformDep, caller: CallerDep) -> LabelsNow:
    """Set (or, with null, remove) labels of a job, running or ended; 409 for a label already set to another
    value without ``overwrite``. trainyard's own ``trainyard.io/`` labels are refused (422)."""
    return LabelsNow(job_id=job_id, labels=p.jobs.relabel(job_id, change, caller))


@router.delete("/{job_id}", status_code=204)
def delete_job(job_id: str, p: PlatformDep, caller: CallerDep) -> Response:
    """An ended job, with its attempts, logs, metrics and files; what it used stays in the usage report.
    409 for a job that has not ended or is part of a pipeline run, sweep, service or Dask cluster."""
    p.jobs.delete(job_id, caller)
    return Response(status_code=204)


@router.get("/{job_id}/logs", response_model=None)
def logs(job_id: str, p: PlatformDep, caller: CallerDep, after: After = 0, attempt: AttemptNo = None, replica: ReplicaNo = None,
         follow: bool = False, tail: Tail = None, cuts: Cuts = False) -> LogPage | EventSourceResponse:
    """Log chunks after cursor ``after``; with ``follow``, a server-sent event stream until the job ends. With
    ``tail``, the chunks of the last ``tail`` lines instead (the first cut to start at a line), then, following,
    what comes after them. With ``cuts``, the stream also says where a log past ``log_keep`` dropped bytes
    (``event: cut``, data ``{"attempt", "replica", "head", "tail"}``: bytes ``head…tail`` are gone); opt-in, so
    a client that reads every event as a chunk keeps working."""
    head: tuple[list, int] | None = None
    if tail is not None:
        if after:
            raise InvalidSpec.parameter("tail", "the end of the log, or after a cursor: not both")
        head = p.jobs.logs(job_id, after=0, attempt=attempt, replica=replica, tail=tail, caller=caller)
        after = head[1]
    if not follow:
        chunks, cursor = head or p.jobs.logs(job_id, after=after, attempt=attempt, replica=replica, caller=caller)
        return LogPage(chunks=chunks, cursor=cursor)
    events = p.jobs.follow(job_id, after=after, attempt=attempt, replica=replica, cuts=cuts, caller=caller)
    # the framing is sse-starlette's; "\n" and a "keep-alive" comment as clients have always seen
    return EventSourceResponse(_sse(events, head), sep="\n", ping=KEEP_ALIVE, headers={"Cache-Control": "no-cache"},
                               ping_message_factory=lambda: ServerSentEvent(comment="keep-alive", sep="\n"))


async def _sse(events: AsyncIterator[LogEvent | LogCut | LogEnd],
               head: tuple[list, int] | None = None) -> AsyncIterator[ServerSentEvent | bytes]:
    if head is not None:  # the tail: each with the cursor after it all, where a reconnect goes on
        for chunk in head[0]:
            yield f"id: {head[1]}\ndata: {chunk.model_dump_json()}\n\n".encode()
    async for e in events:
        if isinstance(e, LogEnd):
            yield ServerSentEvent(json.dumps({"status": e.status.value}), event="end", sep="\n")
        elif isinstance(e, LogCut):  # no id: a reconnect resumes after the last chunk, and is told again
            yield ServerSentEvent(json.dumps(e._asdict()), event="cut", sep="\n")
        else:
            # framed here, not by ServerSentEvent (its encode is ~20x slower): a chunk is one line of
            # JSON, so this is the same frame, and a fast log stream stays as fast as before
            yield f"id: {e.cursor}\ndata: {e.chunk}\n\n".encode()


@router.get("/{job_id}/metrics")
def metrics(job_id: str, p: PlatformDep, caller: CallerDep,
            system: bool = Query(False, description="also the launcher's system/… resource samples")) -> list[MetricPoint]:
    return p.jobs.metrics(job_id, caller, system)


@router.get("/{job_id}/outputs", response_model=list[ArtifactInfo])
def outputs(job_id: str, p: PlatformDep, caller: CallerDep, attempt: AttemptNo = None) -> Response:
    """The outputs of the job's final attempt (the newest that ended: once it succeeded, the one that did),
    or of attempt ``attempt``; ``X-Attempt`` names the attempt shown (absent while none has ended)."""
    shown, files = p.jobs.outputs(job_id, caller, attempt)
    headers = {} if shown is None else {"X-Attempt": str(shown)}
    return Response(_FILES.dump_json(files), media_type="application/json", headers=headers)


_FILES = TypeAdapter(list[ArtifactInfo])


@router.get("/{job_id}/outputs/{path:path}")
def output_file(job_id: str, path: str, p: PlatformDep, caller: CallerDep, attempt: AttemptNo = None,
                range_: Annotated[str | None, Header(alias="Range")] = None) -> Response:
    """The file (of the attempt ``…/outputs`` shows, or of attempt ``attempt``), or with ``Range: bytes=N-``
    its rest (``206``, ``Content-Range``): a download resumes. ``X-Digest`` is always the whole file's, for
    the client to check once it has all of it."""
    try:
        info, part, body = p.jobs.open_output(job_id, path, caller, range_, attempt)
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
