"""/api/v1/pipelines and /api/v1/artifacts: thin; the rules live in services/pipelines."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field, field_validator

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.spec.params import check_finite
from trainyard.spec.pipeline_records import PipelineArtifact, PipelineRunInfo, PipelineRunPage
from trainyard.spec.records import CURSOR_PATTERN, Digest

router = APIRouter(prefix="/api/v1", tags=["pipelines"])


class RunRequest(BaseModel):
    spec: dict[str, Any] = Field(description="the pipeline (YAML as JSON), component files inlined")
    params: dict[str, Any] = Field(default_factory=dict, description="overrides of the pipeline's params")
    workdirs: dict[str, Digest] = Field(default_factory=dict, description="step workdir as written -> snapshot digest")
    source: str | None = Field(None, description="where the pipeline came from, for messages")

    @field_validator("spec", "params")
    @classmethod
    def _finite(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_finite(v)  # the run keeps them as JSON, which has no NaN (PostgreSQL refuses it)


@router.post("/pipelines", status_code=201)
def run_pipeline(body: RunRequest, p: PlatformDep, caller: CallerDep) -> PipelineRunInfo:
    return p.pipelines.create(body.spec, body.params, body.workdirs, body.source, caller)


@router.get("/pipelines")
def list_runs(
    p: PlatformDep,
    caller: CallerDep,
    status: Annotated[list[str] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN, description="next_cursor of the page before")] = None,
) -> PipelineRunPage:
    return p.pipelines.list_runs(status=status, limit=limit, cursor=cursor, caller=caller)


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


@router.post("/pipelines/{run_id}/retry")
def retry_run(run_id: str, p: PlatformDep, caller: CallerDep) -> PipelineRunInfo:
    return p.pipelines.retry(run_id, caller)


@router.get("/artifacts/{key:path}", tags=["artifacts"])
def get_artifact(key: str, p: PlatformDep, caller: CallerDep) -> PipelineArtifact:
    """A step artifact by id or digest (or a unique prefix), with its lineage."""
    return p.pipelines.find_artifact(key, caller)
