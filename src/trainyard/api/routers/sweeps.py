"""/api/v1/sweeps: thin; the rules live in services/sweeps, the search in services/sweep_loop."""

from __future__ import annotations

from fastapi import APIRouter, Query, Response

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.api.paging import PagingDep
from trainyard.spec.paging import Page
from trainyard.spec.sweep import SweepCreate, SweepInfo

router = APIRouter(prefix="/api/v1/sweeps", tags=["sweeps"])


@router.get("")
def list_sweeps(p: PlatformDep, caller: CallerDep, paging: PagingDep,
                all: bool = Query(True, description="with ended ones; false: running only")) -> Page[SweepInfo]:
    """A page of sweeps, newest first."""
    return p.sweeps.page(include_ended=all, caller=caller, paging=paging)


@router.post("", status_code=201)
def create_sweep(body: SweepCreate, p: PlatformDep, caller: CallerDep) -> SweepInfo:
    p.snapshots.check_use(caller, body.snapshot)
    return p.sweeps.create(body.spec, body.snapshot, caller)


@router.get("/{key}")
def get_sweep(key: str, p: PlatformDep, caller: CallerDep) -> SweepInfo:
    return p.sweeps.get(key, caller)


@router.post("/{key}/cancel")
def cancel_sweep(key: str, p: PlatformDep, caller: CallerDep) -> SweepInfo:
    return p.sweeps.cancel(key, caller)


@router.delete("/{key}", status_code=204)
def delete_sweep(key: str, p: PlatformDep, caller: CallerDep) -> Response:
    """An ended sweep with its trials' jobs, as `trainyard rm` deletes jobs; 409 for one still running."""
    p.sweeps.delete(key, caller)
    return Response(status_code=204)
