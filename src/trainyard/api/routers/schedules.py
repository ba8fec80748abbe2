"""/api/v1/schedules: thin; the rules live in services/schedules, the fires in services/schedule_loop."""

from __future__ import annotations

from fastapi import APIRouter, Response

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.api.paging import PagingDep
from trainyard.spec.paging import Page
from trainyard.spec.schedule import ScheduleCreate, ScheduleInfo, ScheduleRun

router = APIRouter(prefix="/api/v1/schedules", tags=["schedules"])


@router.get("")
def list_schedules(p: PlatformDep, caller: CallerDep, paging: PagingDep) -> Page[ScheduleInfo]:
    """A page of schedules, newest first."""
    return p.schedules.page(caller, paging)


@router.post("", status_code=201)
def create_schedule(body: ScheduleCreate, p: PlatformDep, caller: CallerDep) -> ScheduleInfo:
    p.snapshots.check_use(caller, body.snapshot)
    for folder, digest in (body.workdirs or {}).items():
        p.snapshots.check_use(caller, digest, f"workdirs.{folder}")
    return p.schedules.create(body.spec, body.snapshot, caller, body.workdirs, body.source)


@router.get("/{key}")
def get_schedule(key: str, p: PlatformDep, caller: CallerDep) -> ScheduleInfo:
    return p.schedules.get(key, caller)


@router.post("/{key}/pause")
def pause_schedule(key: str, p: PlatformDep, caller: CallerDep) -> ScheduleInfo:
    return p.schedules.pause(key, caller)


@router.post("/{key}/resume")
def resume_schedule(key: str, p: PlatformDep, caller: CallerDep) -> ScheduleInfo:
    return p.schedules.resume(key, caller)


@router.post("/{key}/trigger")
def trigger_schedule(key: str, p: PlatformDep, caller: CallerDep) -> ScheduleRun:
    """Fire now, out of the cron, paused or not; its concurrency policy applies."""
    return p.schedules.trigger(key, caller)


@router.delete("/{key}", status_code=204)
def delete_schedule(key: str, p: PlatformDep, caller: CallerDep) -> Response:
    """The schedule and its record of fires; the jobs it started are left as they are."""
    p.schedules.delete(key, caller)
    return Response(status_code=204)
