"""/api/v1/services: thin; the rules live in services/serving. A replica's logs are its job's
(``/api/v1/jobs/JOB/logs``; the job ids are in the service's ``replicas``)."""

from __future__ import annotations

from fastapi import APIRouter, Query

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.api.paging import PagingDep
from trainyard.spec.paging import Page
from trainyard.spec.service import ApplyRequest, ScaleRequest, ServiceInfo

router = APIRouter(prefix="/api/v1/services", tags=["services"])


@router.get("")
def list_services(p: PlatformDep, caller: CallerDep, paging: PagingDep,
                  all: bool = Query(False, description="with stopped ones")) -> Page[ServiceInfo]:
    """A page of services, newest first."""
    return p.serving.page(include_ended=all, caller=caller, paging=paging)


@router.post("", status_code=200)
def apply_service(body: ApplyRequest, p: PlatformDep, caller: CallerDep) -> ServiceInfo:
    """Create the service, or roll out a changed spec as its next version."""
    p.snapshots.check_use(caller, body.snapshot)
    return p.serving.apply(body.spec, body.snapshot, caller)


@router.get("/{key}")
def get_service(key: str, p: PlatformDep, caller: CallerDep) -> ServiceInfo:
    return p.serving.get(key, caller)


@router.post("/{key}/scale")
def scale_service(key: str, body: ScaleRequest, p: PlatformDep, caller: CallerDep) -> ServiceInfo:
    return p.serving.scale(key, body, caller)


@router.delete("/{key}")
def delete_service(key: str, p: PlatformDep, caller: CallerDep) -> ServiceInfo:
    return p.serving.delete(key, caller)
