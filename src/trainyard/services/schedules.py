"""Schedules on request (create, look up, pause, resume, trigger, delete) and one fire of a schedule.

A schedule is a thin layer over jobs (or pipeline runs): each fire submits its job, or
starts its pipeline, as the schedule's owner, checked as that owner's own submit would be at that moment (a user disabled
or removed from the team since stops the fires, each recorded as failed). What
fires schedules when they are due is the leader's loop in
:mod:`trainyard.services.schedule_loop`.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable, NamedTuple

from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller, visible
from trainyard.crashpoints import crash_point
from trainyard.envvars import TEST_SECOND_CRONS
from trainyard.errors import Conflict, Forbidden, InvalidSpec, JobNotFound, TrainyardError
from trainyard.services.identity import IdentityService
from trainyard.services.jobs import JobService
from trainyard.services.pipelines import PipelineService
from trainyard.spec.paging import Page, Paging
from trainyard.spec.pipeline_records import RunStatus
from trainyard.spec.schedule import (Concurrency, ScheduleInfo, ScheduleRun, ScheduleSpec, cron_problem, explain,
                                     next_fire)
from trainyard.status import JobStatus
from trainyard.store import Store
from trainyard.store.schedules import Claim, FireTaken, ScheduleRow, ScheduleStore
from trainyard.store.tx import WriteTx

log = logging.getLogger("trainyard.schedules")
MAX_ACTIVE = 100  # runs of one schedule not yet ended: past it a fire is skipped (concurrency: allow, every second)


def held(spec: ScheduleSpec) -> str | None:
    """Why a stored schedule is held paused whatever it was asked (its cron is one a submit is refused now:
    six fields fired every second), or None. The loop pauses it when due; it never fires."""
    if os.environ.get(TEST_SECOND_CRONS):
        return None
    problem = cron_problem(spec.cron)
    return None if problem is None else f"cron: {problem}. Delete it and create it again with such a cron"


class Shown(NamedTuple):
    """A stored schedule's pause as the API, its clients and ``/metrics`` say it."""

    suspended: bool
    next_at: float | None
    held: str | None  # why it is held paused (:func:`held`), or None


def shown(row: ScheduleRow) -> Shown:
    """``row`` as the loop will leave it: one :func:`held` but not yet due is paused already, with no next fire,
    though the store says so only once the loop found it due."""
    why = held(row["spec"])
    return Shown(row["suspended"] or why is not None, None if why else row["next_at"], why)


class ScheduleService:
    def __init__(self, store: Store, jobs: JobService, identity: IdentityService, pipelines: PipelineService,
                 wake: Callable[[], None] = lambda: None) -> None:
        self.schedules = ScheduleStore(store)
        self.jobs = jobs
        self.pipelines = pipelines
        self.identity = identity
        self.wake = wake  # the schedule loop (bound by the platform)

    def create(self, spec: ScheduleSpec, snapshot: str | None = None, caller: Caller = LOCAL_ADMIN,
               workdirs: dict[str, str] | None = None, source: str | None = None) -> ScheduleInfo:
        """Check its job (or pipeline) as the caller's submit would be checked now, then store it; the loop
        fires it."""
        now = time.time()
        if spec.job is not None:
            owner, team = self.jobs.check(spec.run_job(now), snapshot, caller)
        else:
            if not isinstance(spec.pipeline, dict):
                raise InvalidSpec(errors=[{"field": "pipeline", "line": None, "where": "pipeline", "message":
                                           "the pipeline itself (the CLI and SDK read the file named here)"}])
            team = self.pipelines.check(spec.pipeline, spec.run_params(now), workdirs, source, caller)[3]
            owner = caller.user  # and the team of its steps' queues, as its runs will be
        sid = self.schedules.create(spec, snapshot, owner, team, next_fire(spec.cron, spec.timezone, now),
                                    workdirs or None, source)
        self.jobs.audit.record(caller, "schedule.create", sid, name=spec.name, cron=spec.cron, team=team)
        self.wake()
        return self.get(sid, caller)

    def pause(self, key: str, caller: Caller = LOCAL_ADMIN) -> ScheduleInfo:
        row = self._changeable(key, caller, "pause")
        if self.schedules.set_suspended(row["id"], True, None):
            self.jobs.audit.record(caller, "schedule.pause", row["id"])
        return self.get(row["id"], caller)

    def resume(self, key: str, caller: Caller = LOCAL_ADMIN) -> ScheduleInfo:
        """Fires from now on: those due while it was paused are not made up."""
        row = self._fireable(key, caller, "resume")
        spec: ScheduleSpec = row["spec"]
        if self.schedules.set_suspended(row["id"], False, next_fire(spec.cron, spec.timezone, time.time())):
            self.jobs.audit.record(caller, "schedule.resume", row["id"])
        self.wake()
        return self.get(row["id"], caller)

    def trigger(self, key: str, caller: Caller = LOCAL_ADMIN) -> ScheduleRun:
        """Fire now, out of the cron (paused or not), as the owner; its concurrency policy applies."""
        row = self._fireable(key, caller, "trigger")
        self.jobs.audit.record(caller, "schedule.trigger", row["id"])
        return self.fire(row, time.time(), manual=True)

    def delete(self, key: str, caller: Caller = LOCAL_ADMIN) -> None:
        """Forget it and its fires; the jobs it started go on (cancel them as any job)."""
        row = self._changeable(key, caller, "delete")
        self.schedules.delete(row["id"])
        self.jobs.audit.record(caller, "schedule.delete", row["id"], name=row["name"])

    def _changeable(self, key: str, caller: Caller, verb: str) -> ScheduleRow:
        row = self.schedules.find(key, visible(caller))
        if not caller.may(Action.CANCEL_OWN, row["team"], row["owner"]):
            raise Forbidden(f"you may {verb} only your own schedules; {row['name']} is {row['owner']}'s",
                            schedule=row["id"])
        return row

    def _fireable(self, key: str, caller: Caller, verb: str) -> ScheduleRow:
        row = self._changeable(key, caller, verb)
        if (why := held(row["spec"])) is not None:
            raise Conflict(f"schedule {row['name']} cannot {verb}: {why}", field="cron", schedule=row["id"])
        return row

    # -- one fire ----------------------------------------------------------------------

    def fire(self, row: ScheduleRow, due: float, manual: bool = False, claim: Claim | None = None,
             missed: list[ScheduleRun] | None = None) -> ScheduleRun | None:
        """Submit the schedule's job for the fire due at ``due``, as its concurrency policy allows; recorded, after
        the ``missed`` fires before it, with the loop's ``claim`` on it (a trigger has none), in the transaction
        that stores the job or run it starts: a crash leaves the fire made and recorded, or still due. None if
        another fire, a pause or a delete took the claim first (nothing was stored)."""
        spec: ScheduleSpec = row["spec"]
        outcome, message = "started", None
        active = self.schedules.active([row["id"]])[row["id"]]
        owner = self.identity.caller_of(row["owner"])
        if owner is None:
            outcome, message = "failed", f"its owner {row['owner']} is disabled or gone: pause or delete it"
        elif active and spec.concurrency is Concurrency.FORBID:
            outcome, message = "skipped", f"{', '.join(active)} still running (concurrency: forbid)"
        elif len(active) >= MAX_ACTIVE and spec.concurrency is Concurrency.ALLOW:
            outcome, message = "skipped", f"{len(active)} of its runs have not ended, the most a schedule keeps going"
        replacing: list[str] = []
        if outcome == "started" and active and spec.concurrency is Concurrency.REPLACE:
            replacing, message = active, f"replaced {', '.join(active)}"
        run = ScheduleRun(at=due, fired_at=time.time(), outcome=outcome, message=message, manual=manual)
        stopped: dict[str, JobStatus | bool | None] = {}  # what each replaced one's cancel request left (_stopping)
        if outcome == "started":
            def record(tx: WriteTx, key: str) -> None:  # the link of the job or run it starts
                nonlocal run
                run = run.model_copy(update={"job_id" if spec.job is not None else "run_id": key})
                self.schedules.record(tx, row["id"], [*(missed or []), run], claim)
                # only once the claim is this server's, and with it: a pause or another leader taking the fire
                # first leaves them running; a crash after the commit leaves them cancelling (the restart's
                # reconcile stops them)
                for old in replacing:
                    stopped[old] = self._request_stop(tx, old, row["name"])
                crash_point("schedule.claimed")

            try:
                if spec.job is not None:
                    self.jobs.submit(spec.run_job(due), row["snapshot"], owner, link=record)
                else:
                    pipeline: dict = spec.pipeline  # type: ignore[assignment]
                    self.pipelines.create(pipeline, spec.run_params(due), row["workdirs"], row["source"], owner,
                                          link=record)
                crash_point("schedule.fired")
            except FireTaken:
                return None
            except TrainyardError as e:  # the owner's team, the queue, room for it: as a submit now would be told
                run = ScheduleRun(at=due, fired_at=run.fired_at, outcome="failed", message=e.message, manual=manual)
            if run.outcome == "started":  # committed: the replaced ones' requests with it
                for old, requested in stopped.items():
                    self._stopping(old, requested)
        if run.outcome != "started" and not self.schedules.add_runs(row["id"], [*(missed or []), run], claim):
            return None
        started = run.job_id or run.run_id
        log.info("schedule %s: %s%s%s", row["id"], run.outcome, f" {started}" if started else "",
                 f" ({run.message})" if run.message else "")
        return run

    def _request_stop(self, tx: WriteTx, key: str, name: str) -> JobStatus | bool | None:
        """Ask, in ``tx``, for a job or pipeline run a fire replaces to be cancelled (the schedule's own doing: no
        caller's rights asked); what :meth:`_stopping` needs once ``tx`` has committed."""
        why = f"replaced by a fire of schedule {name}"
        if key.startswith("j-"):
            try:
                return self.jobs.store.request_cancel(key, by="system", why=why, tx=tx)
            except JobNotFound:  # deleted since it was read as active: nothing to stop
                return None
        return self.pipelines.runs.move_run(key, RunStatus.CANCELLING, by="system", reason=why, tx=tx)

    def _stopping(self, key: str, requested: JobStatus | bool | None) -> None:
        """After the commit: the engine told to stop a replaced job's attempts; a replaced run's steps stopped."""
        if isinstance(requested, JobStatus):
            self.jobs.stopping(key, requested)
        elif requested is True:
            self.pipelines.advance(key)
            self.pipelines.advance(key)  # as a cancel does: a pending step's job was cancelled at once

    # -- looking up ------------------------------------------------------------------

    def get(self, key: str, caller: Caller = LOCAL_ADMIN) -> ScheduleInfo:
        return self.infos([self.schedules.find(key, visible(caller))])[0]

    def page(self, caller: Caller = LOCAL_ADMIN, paging: Paging = Paging()) -> Page[ScheduleInfo]:
        """One page of what the caller may see, newest first, and the cursor of the next."""
        rows, cursor = self.schedules.page(visible(caller), paging)
        return Page[ScheduleInfo](items=self.infos(rows, runs=5), next_cursor=cursor)

    def infos(self, rows: list[ScheduleRow], runs: int = 20) -> list[ScheduleInfo]:
        ids = [r["id"] for r in rows]
        fired, active = self.schedules.runs_of(ids, runs), self.schedules.active(ids)
        out = []
        for r in rows:
            pause = shown(r)
            out.append(ScheduleInfo(id=r["id"], name=r["name"], team=r["team"], owner=r["owner"], spec=r["spec"],
                                    suspended=pause.suspended, held=pause.held,
                                    next_at=pause.next_at, last_at=r["last_at"],
                                    explain=explain(r["spec"].cron), active=active[r["id"]], runs=fired[r["id"]],
                                    created_at=r["created_at"], updated_at=r["updated_at"]))
        return out
