"""The leader's schedule loop: each schedule fires when it is due.

It sleeps until the earliest ``next_at`` of any schedule (at most :data:`LOOK`
seconds, so schedules made through another server are seen), and is woken when
one is created or resumed. A fire is claimed by moving ``next_at`` on (see
:mod:`trainyard.store.schedules`) in the transaction that stores its job, so a fire
is made once, even across a change of leader or a crash. Fires missed while no server led
are recorded as missed, and only the latest of them is made, if it is still
within the schedule's ``starting_deadline`` (Kubernetes CronJob's rule).
"""

from __future__ import annotations

import logging
import time

from trainyard.services.schedules import ScheduleService, held
from trainyard.services.ticker import Ticker
from trainyard.spec.schedule import (ScheduleRun, ScheduleSpec, after_deadline, describe_gap, fires_between, iso,
                                     last_fire, next_fire)
from trainyard.store.schedules import Claim, ScheduleRow

log = logging.getLogger("trainyard.schedules")
LOOK = 5.0  # seconds between looks at the schedules when none is due sooner


class ScheduleLoop(Ticker):
    name = "trainyard-schedules"
    log = log

    def __init__(self, service: ScheduleService) -> None:
        super().__init__()
        self.service = service
        self.schedules = service.schedules
        self._sleep = LOOK

    def pause(self) -> float:
        return self._sleep

    def cycle(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        for row in self.schedules.due(now):
            if (why := held(row["spec"])) is not None:
                if self.schedules.hold(row["id"], row["next_at"]):  # once: held, it is due no more
                    log.warning("schedule %s (%s) is held paused, not fired: %s", row["id"], row["name"], why)
                continue
            try:
                self.due(row, now)
            except Exception:
                log.exception("schedule %s: fire failed", row["id"])
        soonest = self.schedules.next_due()
        self._sleep = LOOK if soonest is None else min(LOOK, max(0.05, soonest - time.time()))

    def due(self, row: ScheduleRow, now: float) -> ScheduleRun | None:
        """Make the fire ``row`` is due for (the latest, when several were missed); None if another took it."""
        spec: ScheduleSpec = row["spec"]
        due = row["next_at"]
        latest = max(due, last_fire(spec.cron, spec.timezone, now) or due)
        claim = Claim(row["id"], due, next_fire(spec.cron, spec.timezone, now), latest)
        missed = []  # recorded with the claim, in the transaction that makes the fire
        if latest > due:
            n = 1 + fires_between(spec.cron, spec.timezone, due, latest)
            missed.append(ScheduleRun(
                at=due, fired_at=now, outcome="missed",
                message=f"{n}{'+' if n > 1000 else ''} fire(s) from {iso(due, spec.timezone)} on were not made "
                        "(no server was leading, or it was busy); only the latest is"))
        if after_deadline(spec, latest, now):
            run = ScheduleRun(at=latest, fired_at=now, outcome="missed",
                              message=f"due {describe_gap(now - latest)} ago, past its starting_deadline "
                                      f"({describe_gap(spec.starting_deadline)})")
            return run if self.schedules.add_runs(row["id"], [*missed, run], claim) else None
        return self.service.fire(row, latest, claim=claim, missed=missed)
