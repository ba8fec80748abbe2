"""Nodes, snapshots, health, and the launcher's report endpoint."""

from __future__ import annotations

import tempfile
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Request, Response
from starlette.concurrency import run_in_threadpool

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.auth.tokens import bearer
from trainyard.errors import Forbidden
from trainyard.spec.records import NodeInfo
from trainyard.spec.reports import LauncherReport, ReportAnswer

router = APIRouter()
# an upload past this goes to disk while it arrives: several at once must not add up in the server's memory
SPOOL_IN_MEMORY = 1 << 20


@router.get("/healthz", tags=["system"])
def healthz(p: PlatformDep) -> dict[str, Any]:
    return p.health()


@router.get("/api/v1/nodes", tags=["nodes"])
def nodes(p: PlatformDep) -> list[NodeInfo]:
    return p.cluster.nodes()


@router.head("/api/v1/snapshots/{digest}", tags=["snapshots"])
def has_snapshot(digest: str, p: PlatformDep) -> Response:
    return Response(status_code=200 if p.snapshots.has(digest) else 404)


@router.put("/api/v1/snapshots/{digest}", status_code=201, tags=["snapshots"])
async def put_snapshot(digest: str, request: Request, p: PlatformDep, caller: CallerDep) -> dict[str, str]:
    """Upload a code snapshot (tar.gz) under its sha256; identical code is stored once.

    The body is spooled (to disk past a few MiB), then streamed to the store off the event loop."""
    if not (caller.admin or caller.submit_teams()):
        raise Forbidden("only a user who may submit uploads code")
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as body:
        async for chunk in request.stream():
            body.write(chunk)
        body.seek(0)
        return {"digest": digest, "url": await run_in_threadpool(p.snapshots.put, digest, body)}


@router.post("/internal/attempts/{attempt_id}/replicas/{replica}/report", tags=["internal"],
             response_model=ReportAnswer)
async def report(attempt_id: str, replica: Annotated[int, Path(ge=0, le=2**31 - 1)], body: LauncherReport,
                 p: PlatformDep, authorization: Annotated[str | None, Header()] = None) -> Response:
    """A launcher's report: log bytes and metric lines by offset, and its result (see ``trainyard.launch``).

    Not behind the users' token: a launcher shows its own attempt's credential
    (``Authorization: Bearer <attempt token>``), checked by the store with the report.

    Async, with the store's work in one thread-pool call and the answer serialized here: a plain
    function took two hops per report (the call, then FastAPI's check of the returned model)."""
    answer = await run_in_threadpool(p.attempts.report, attempt_id, replica, body, bearer(authorization))
    return Response(answer.model_dump_json(), media_type="application/json")
