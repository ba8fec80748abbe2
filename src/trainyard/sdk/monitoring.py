"""Monitoring from Python: ``Client().monitoring.usage(by="team", since="30d")``, a job's events and resource use."""

from __future__ import annotations

from trainyard.sdk.http import Http
from trainyard.spec.monitoring import EventInfo, ReplicaUsageInfo, UsageReport


class Monitoring:
    """Status events, resource use and usage reports on one server (``Client.monitoring``)."""

    def __init__(self, http: Http) -> None:
        self.http = http

    def events(self, job_id: str) -> list[EventInfo]:
        """Every status change of a job, oldest first, with its reason and who caused it."""
        return [EventInfo.model_validate(e) for e in self.http.request("GET", f"/api/v1/jobs/{job_id}/events").json()]

    def run_events(self, run_id: str) -> list[EventInfo]:
        """Every status change of a pipeline run."""
        return [EventInfo.model_validate(e)
                for e in self.http.request("GET", f"/api/v1/pipelines/{run_id}/events").json()]

    def job_usage(self, job_id: str) -> list[ReplicaUsageInfo]:
        """What each replica of each attempt used (latest and peak memory, GPU utilisation, idle flag)."""
        return [ReplicaUsageInfo.model_validate(u)
                for u in self.http.request("GET", f"/api/v1/jobs/{job_id}/usage").json()]

    def usage(self, by: str = "team", since: str = "30d") -> UsageReport:
        """GPU-, CPU- and memory-hours (and cost, with the server's prices) per ``by`` over ``since``, of
        the jobs this token may see: its teams' and its own, every team's for an admin."""
        r = self.http.request("GET", "/api/v1/usage", params={"by": by, "since": since})
        return UsageReport.model_validate(r.json())
