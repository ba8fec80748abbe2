"""Snapshots, health, and the launcher's report endpoint."""

from __future__ import annotations

import tempfile
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from pydantic import Field, TypeAdapter
from starlette.concurrency import run_in_threadpool

from trainyard.api import lean
from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.api.spec_text import read_json
from trainyard.auth.tokens import bearer
from trainyard.errors import Forbidden
from trainyard.services.platform import Platform
from trainyard.spec.reports import LauncherReport, ReportAnswer

router = APIRouter()
# an upload past this goes to disk while it arrives: several at once must not add up in the server's memory
SPOOL_IN_MEMORY = 1 << 20


@router.get("/healthz", tags=["system"])
def healthz(p: PlatformDep) -> dict[str, Any]:
    return p.health()


@router.head("/api/v1/snapshots/{digest}", tags=["snapshots"])
def has_snapshot(digest: str, p: PlatformDep, caller: CallerDep) -> Response:
    return Response(status_code=200 if p.snapshots.visible(caller, digest) else 404)


@router.put("/api/v1/snapshots/{digest}", status_code=201, tags=["snapshots"])
async def put_snapshot(digest: str, request: Request, p: PlatformDep, caller: CallerDep) -> dict[str, str]:
    """Upload a code snapshot (tar.gz) under its sha256; identical code is stored once.

    The body is spooled (to disk past a few MiB), then streamed to the store off the event loop. A bad digest, or
    a body over the server's snapshot limit (declared, or once it has passed it), is refused before more is kept."""
    if not (caller.admin or caller.submit_teams()):
        raise Forbidden("your role does not allow submitting jobs (a viewer reads only), nor uploading their code"
                        if caller.teams else "you belong to no team, so you submit no job and upload no code: "
                        "an admin adds you to one")
    snapshots = p.snapshots
    snapshots.check_upload(digest, request.headers.get("content-length"))
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as body:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > snapshots.max_bytes:
                raise snapshots.too_large()
            body.write(chunk)
        body.seek(0)
        return {"digest": digest, "url": await run_in_threadpool(snapshots.put, digest, body, caller)}


_REPLICA = TypeAdapter(Annotated[int, Field(ge=0, le=2**31 - 1)])
# every answer a report can get, serialized once (tests/unit/test_reports.py fails if ReportAnswer grows a field)
# (without requests: most answers carry none, and a launcher from before them reads only cancel)
_ANSWERS = {cancel: ReportAnswer(cancel=cancel).model_dump_json(exclude={"stacks", "execs"}).encode()
            for cancel in (False, True)}


@router.post("/internal/attempts/{attempt_id}/replicas/{replica}/report", tags=["internal"],
             response_model=ReportAnswer, openapi_extra=lean.documented([
                 lean.parameter("attempt_id", "path", TypeAdapter(str)), lean.parameter("replica", "path", _REPLICA),
                 lean.parameter("authorization", "header", TypeAdapter(str | None), required=False)], LauncherReport))
async def report(request: Request) -> Response:
    """A launcher's report: log bytes and metric lines by offset, and its result (see ``trainyard.launch``).

    Not behind the users' token: a launcher shows its own attempt's credential
    (``Authorization: Bearer <attempt token>``), checked by the store with the report.

    Async, with the store's work in one thread-pool call and the answer serialized here: a plain
    function took two hops per report (the call, then FastAPI's check of the returned model).
    Lean (:mod:`trainyard.api.lean`): one report per job, and its parameters cost more through
    FastAPI's dependency solving than by hand."""
    replica = lean.checked(_REPLICA, request.path_params["replica"], "path", "replica")
    body = await read_json(request, LauncherReport)
    p: Platform = request.app.state.platform
    answer = await run_in_threadpool(p.attempts.report, request.path_params["attempt_id"], replica, body,
                                     bearer(request.headers.get("authorization")))
    return Response(answer.model_dump_json().encode() if answer.stacks or answer.execs else _ANSWERS[answer.cancel],
                    media_type="application/json")
