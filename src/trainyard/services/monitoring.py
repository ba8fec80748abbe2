"""Monitoring as the API serves it: status events, a job's resource use, usage reports, ``/metrics``."""

from __future__ import annotations

import time
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from trainyard.auth.permissions import LOCAL_ADMIN, Caller, visible
from trainyard.errors import Forbidden, InvalidSpec
from trainyard.services.accounting import Accounting
from trainyard.spec.monitoring import EventInfo, ReplicaUsageInfo, UsageBy, UsageReport
from trainyard.spec.units import parse_duration
from trainyard.store import Store

METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST


def _invalid(field: str, message: str) -> InvalidSpec:
    return InvalidSpec.parameter(field, message)  # by and since are the report's query, not a spec's fields


class MonitoringService:
    def __init__(self, store: Store, accounting: Accounting, registry: CollectorRegistry,
                 check_run: Callable[[str], object]) -> None:
        """``check_run``: raises :class:`~trainyard.errors.PipelineRunNotFound` for an unknown run."""
        self.store = store
        self.accounting = accounting
        self.registry = registry
        self.check_run = check_run

    def metrics_text(self, caller: Caller) -> bytes:
        # the scrape names every team's jobs, queues and schedules: it is not cut per caller, so it is the admin's
        if not caller.admin:
            raise Forbidden("only an admin, or the server's own token, reads /metrics")
        return generate_latest(self.registry)

    def job_events(self, job_id: str) -> list[EventInfo]:
        return self.store.events("job", job_id)

    def run_events(self, run_id: str) -> list[EventInfo]:
        self.check_run(run_id)
        return self.store.events("pipeline_run", run_id)

    def job_usage(self, job_id: str) -> list[ReplicaUsageInfo]:
        return self.store.job_usage(job_id)

    def usage(self, by: str, since: str, caller: Caller = LOCAL_ADMIN) -> UsageReport:
        """``by`` one of team, user, queue, gpu_type; ``since`` a duration back from now (``30d``, ``12h``).
        Counts only the jobs ``caller`` may see, as a listing does: an admin's report has every team,
        a member's its teams' jobs and its own."""
        try:
            group = UsageBy(by)
        except ValueError:
            raise _invalid("by", f"{by!r}: use one of {', '.join(b.value for b in UsageBy)}") from None
        try:
            seconds = parse_duration(since)
        except ValueError as e:
            # a word that is no duration is named by the error itself ('yesterday' is not a duration)
            raise _invalid("since", str(e) if str(e).startswith(repr(since)) else f"{since!r}: {e}") from None
        if seconds <= 0:
            raise _invalid("since", f"{since!r}: must be more than 0")
        now = time.time()
        return self.accounting.report(group, now - seconds, now, visible(caller))
