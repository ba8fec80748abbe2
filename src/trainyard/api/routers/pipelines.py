"""/api/v1/pipelines and /api/v1/artifacts: thin; the rules live in services/pipelines."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, field_validator

from starlette.concurrency import run_in_threadpool

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.api.spec_text import SOURCE, SpecCheck, is_yaml, read_json, read_text, read_yaml, yaml_body
from trainyard.auth.permissions import Caller
from trainyard.errors import InvalidSpec
from trainyard.services.platform import Platform
from trainyard.spec.lines import error_entry
from trainyard.spec.params import check_finite
from trainyard.spec.pipeline_records import PipelineArtifact, PipelineRunInfo, PipelineRunPage, RunStatus
from trainyard.spec.records import CURSOR_PATTERN, Digest

router = APIRouter(prefix="/api/v1", tags=["pipelines"])


class RunRequest(BaseModel):
    spec: dict[str, Any] = Field(description="the pipeline (YAML as JSON), component files inlined")
    params: dict[str, Any] = Field(default_factory=dict, description="overrides of the pipeline's params")
    workdirs: dict[str, Digest] = Field(default_factory=dict, description="step workdir as written -> snapshot digest")
    source: str | None = Field(None, max_length=1000, pattern=r"^[^\x00]*$",
                               description="where the pipeline came from, for messages")

    @field_validator("spec", "params")
    @classmethod
    def _finite(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_finite(v)  # the run keeps them as JSON, which has no NaN (PostgreSQL refuses it)


@router.post("/pipelines", status_code=201, response_model=PipelineRunInfo, openapi_extra=yaml_body(RunRequest),
             responses={200: {"model": SpecCheck, "description": "dry_run: the pipeline would be accepted"}})
async def run_pipeline(request: Request, p: PlatformDep, caller: CallerDep,
                       dry_run: Annotated[bool, Query(description="check everything, run nothing")] = False,
                       ) -> Response:
    """A run of a pipeline as JSON (``{spec, params, workdirs}``), or of a pipeline file's text as YAML
    (``Content-Type: application/yaml``; its steps run in the server's folder), whose errors name its lines."""
    if not is_yaml(request):
        body = await read_json(request, RunRequest)
        return await run_in_threadpool(_run, p, caller, dry_run, body.spec, body.params, body.workdirs, body.source)
    return await run_in_threadpool(_run_text, p, caller, dry_run, await read_text(request))


def _run_text(p: Platform, caller: Caller, dry_run: bool, text: str) -> Response:
    data, lines = read_yaml(text)  # off the event loop: a big text takes a while
    try:
        check_finite(data)
    except ValueError as e:
        raise InvalidSpec(errors=[error_entry(SOURCE, None, "", str(e))]) from None
    return _run(p, caller, dry_run, data, {}, {}, SOURCE, lines)


def _run(p: Platform, caller: Caller, dry_run: bool, spec: dict[str, Any], params: dict[str, Any],
         workdirs: dict[str, str], source: str | None, lines: dict | None = None) -> Response:
    for folder, digest in workdirs.items():
        p.snapshots.check_use(caller, digest, f"workdirs.{folder}")
    if dry_run:
        checked, _, graph, _ = p.pipelines.check(spec, params, workdirs, source, caller, lines)
        found = SpecCheck(kind="pipeline", name=checked.name, steps=len(graph.instances), warnings=graph.warnings)
        return JSONResponse(found.model_dump(mode="json"), status_code=200)
    return JSONResponse(p.pipelines.create(spec, params, workdirs, source, caller, lines).model_dump(mode="json"),
                        status_code=201)


@router.get("/pipelines")
def list_runs(
    p: PlatformDep,
    caller: CallerDep,
    status: Annotated[list[RunStatus] | None, Query()] = None,
    name: Annotated[str | None, Query(max_length=200, pattern=r"^[^\x00]*$",
                                      description="runs whose name contains this, any case")] = None,
    exact_name: Annotated[str | None, Query(max_length=200, pattern=r"^[^\x00]*$",
                                            description="runs of exactly this name")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN, description="next_cursor of the page before")] = None,
    until: Annotated[float | None, Query(ge=0, le=2**53, description="started before this Unix time")] = None,
) -> PipelineRunPage:
    return p.pipelines.list_runs(status=[s.value for s in status] if status else None, limit=limit, cursor=cursor,
                                 caller=caller, name=name, exact_name=exact_name, until=until)


@router.get("/pipelines/{run_id}")
def get_run(run_id: str, p: PlatformDep, caller: CallerDep) -> PipelineRunInfo:
    return p.pipelines.get(run_id, caller)


@router.get("/pipelines/{run_id}/wait", response_model=PipelineRunInfo)
async def wait_run(run_id: str, p: PlatformDep, caller: CallerDep, timeout: Annotated[float, Query(ge=0, le=300)] = 30,
                   changed_after: Annotated[float | None, Query(allow_inf_nan=False,
                                                               description="return once updated_at passes this")] = None,
                   ) -> Response:
    """The run once it has ended (or, with ``changed_after``, once it changed), or as it is after ``timeout``."""
    # JSON from the service, sent as it is: FastAPI would validate the model again on the way out
    return Response(await p.pipelines.wait(run_id, timeout, changed_after, caller), media_type="application/json")


@router.post("/pipelines/{run_id}/cancel")
def cancel_run(run_id: str, p: PlatformDep, caller: CallerDep) -> PipelineRunInfo:
    return p.pipelines.cancel(run_id, caller)


@router.delete("/pipelines/{run_id}", status_code=204)
def delete_run(run_id: str, p: PlatformDep, caller: CallerDep) -> Response:
    """An ended run with its steps' jobs and its artifacts, as `trainyard rm` deletes jobs; 409 saying why for
    one still running, or whose outputs another run's cached step reuses."""
    p.pipelines.delete(run_id, caller)
    return Response(status_code=204)


@router.post("/pipelines/{run_id}/retry")
def retry_run(run_id: str, p: PlatformDep, caller: CallerDep) -> PipelineRunInfo:
    return p.pipelines.retry(run_id, caller)


@router.get("/artifacts/{key:path}", tags=["artifacts"])
def get_artifact(key: str, p: PlatformDep, caller: CallerDep) -> PipelineArtifact:
    """A step artifact by id or digest (or a unique prefix), with its lineage."""
    return p.pipelines.find_artifact(key, caller)
