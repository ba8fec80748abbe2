"""Monitoring: ``/metrics`` for Prometheus, status events, resource use, and usage reports."""

from __future__ import annotations

from fastapi import APIRouter, Query, Response

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.services.monitoring import METRICS_CONTENT_TYPE
from trainyard.spec.monitoring import EventInfo, ReplicaUsageInfo, UsageReport

router = APIRouter(tags=["monitoring"])


@router.get("/metrics", include_in_schema=False)
def metrics(p: PlatformDep, caller: CallerDep) -> Response:
    return Response(p.monitoring.metrics_text(caller), media_type=METRICS_CONTENT_TYPE)


@router.get("/api/v1/jobs/{job_id}/events")
def job_events(job_id: str, p: PlatformDep, caller: CallerDep) -> list[EventInfo]:
    p.jobs.get(job_id, caller)  # another team's job is not found, as everywhere else
    return p.monitoring.job_events(job_id)


@router.get("/api/v1/jobs/{job_id}/usage")
def job_usage(job_id: str, p: PlatformDep, caller: CallerDep) -> list[ReplicaUsageInfo]:
    p.jobs.get(job_id, caller)
    return p.monitoring.job_usage(job_id)


@router.get("/api/v1/pipelines/{run_id}/events")
def run_events(run_id: str, p: PlatformDep, caller: CallerDep) -> list[EventInfo]:
    p.pipelines.get(run_id, caller)
    return p.monitoring.run_events(run_id)


@router.get("/api/v1/usage")
def usage(p: PlatformDep, caller: CallerDep, by: str = Query("team", max_length=16),
          since: str = Query("30d", max_length=32)) -> UsageReport:
    """Resource-hours of the jobs the caller may see (every team's for an admin)."""
    return p.monitoring.usage(by, since, caller)
