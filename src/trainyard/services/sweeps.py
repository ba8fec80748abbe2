"""Sweeps on request: create, look up, cancel, delete.

A sweep is a thin layer over jobs: each trial is an ordinary job of the sweep's
owner, in its queue, with the sampled params. What samples the next trials,
feeds each trial's metric to the early-stopping rule and ends the sweep is the
leader's loop in :mod:`trainyard.services.sweep_loop`; requests only write what
is wanted and wake it.
"""

from __future__ import annotations

from typing import Callable

from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller, visible
from trainyard.crashpoints import crash_point
from trainyard.errors import Conflict, Forbidden, SweepNotFound, Unsupported
from trainyard.services.jobs import JobService
from trainyard.spec.paging import Page, Paging
from trainyard.spec.sweep import SweepInfo, SweepSpec, SweepStatus, TrialInfo, TrialState
from trainyard.store import Store
from trainyard.store.sweeps import SweepRow, SweepStore, stop_reason


def optuna_version() -> str | None:
    try:
        import optuna
    except ImportError:
        return None
    return optuna.__version__


class SweepService:
    def __init__(self, store: Store, jobs: JobService, wake: Callable[[], None] = lambda: None) -> None:
        self.sweeps = SweepStore(store)
        self.store = store
        self.jobs = jobs
        self.wake = wake  # the sweep loop (bound by the platform)

    def create(self, spec: SweepSpec, snapshot: str | None = None, caller: Caller = LOCAL_ADMIN) -> SweepInfo:
        """Check a trial as a job would be checked (queue, room on some node, its code uploaded), then store
        the sweep; the loop starts its trials. They belong to the caller, in the team the queue gives them."""
        if optuna_version() is None:
            raise Unsupported("this server has no Optuna: install trainyard[sweeps] where the server runs")
        first = {k: p.placeholder() for k, p in spec.searched().items()}
        owner, team = self.jobs.check(spec.trial_job(0, first), snapshot, caller)
        sweep_id = self.sweeps.create(spec, snapshot, owner=owner, team=team)
        self.jobs.audit.record(caller, "sweep.create", sweep_id, name=spec.name, queue=spec.job.queue, team=team)
        self.wake()
        return self.get(sweep_id)

    def cancel(self, key: str, caller: Caller = LOCAL_ADMIN) -> SweepInfo:
        """Stop every running trial; the sweep is ``cancelled`` at once (the best so far stays)."""
        row = self.sweeps.find(key, visible(caller))
        if not caller.may(Action.CANCEL_OWN, row["team"], row["owner"]):
            raise Forbidden(f"you may cancel only your own sweeps; {row['id']} is {row['owner']}'s",
                            sweep_id=row["id"])
        self.jobs.audit.record(caller, "sweep.cancel", row["id"], status=row["status"].value)
        said = "the sweep was cancelled"
        jobs = self.sweeps.end(row["id"], SweepStatus.CANCELLED, "cancelled", said)
        if jobs is not None:
            crash_point("sweep.cancel_ended")
            self.stop_jobs(jobs, stop_reason(said, row["id"]))
        self.wake()
        return self.get(row["id"])

    def delete(self, key: str, caller: Caller = LOCAL_ADMIN) -> None:
        """An ended sweep with its trials and their jobs (records and files, as ``trainyard rm``); Conflict
        saying why for one still running, or whose trials' jobs may not go yet (one still cancelling)."""
        row = self.sweeps.find(key, visible(caller))
        if not caller.may(Action.CANCEL_OWN, row["team"], row["owner"]):
            raise Forbidden(f"you may delete only your own sweeps; {row['id']} is {row['owner']}'s",
                            sweep_id=row["id"])
        why = "it is running: cancel it first" if row["status"] is SweepStatus.RUNNING else \
            self.jobs.remover.why_not_sweep(row["id"])
        if why is not None:
            raise Conflict(f"sweep {row['id']} cannot be deleted: {why}", sweep_id=row["id"])
        if self.jobs.remover.remove_sweep(row["id"]) is None:  # deleted meanwhile, by another request
            raise SweepNotFound(f"no such sweep: {key}", sweep=key)
        self.jobs.audit.record(caller, "sweep.delete", row["id"], name=row["name"], status=row["status"].value)

    def stop_jobs(self, job_ids: list[str], why: str, by: str = "user") -> None:
        """Stop the jobs of trials that were just ended (:meth:`SweepStore.end`), saying ``why``."""
        for job_id in job_ids:
            self.jobs.stop(job_id, why, by=by)

    # -- looking up -------------------------------------------------------------

    def get(self, key: str, caller: Caller = LOCAL_ADMIN) -> SweepInfo:
        return self.info(self.sweeps.find(key, visible(caller)))

    def page(self, include_ended: bool = True, caller: Caller = LOCAL_ADMIN,
             paging: Paging = Paging()) -> Page[SweepInfo]:
        """One page of what the caller may see, newest first, and the cursor of the next."""
        rows, cursor = self.sweeps.page(include_ended, visible(caller), paging)
        trials = self.sweeps.trials_of([r["id"] for r in rows])
        return Page[SweepInfo](items=[self.info(r, trials=False, found=trials.get(r["id"], [])) for r in rows],
                               next_cursor=cursor)

    def info(self, row: SweepRow, trials: bool = True, found: list[TrialInfo] | None = None) -> SweepInfo:
        if found is None:
            found = self.sweeps.trials(row["id"])
        return SweepInfo(id=row["id"], name=row["name"], status=row["status"], reason=row["reason"],
                         spec=row["spec"], owner=row["owner"], team=row["team"], best=best(row["spec"], found),
                         counts={s: n for s in TrialState if (n := sum(t.state is s for t in found))},
                         trials=found if trials else [], created_at=row["created_at"],
                         updated_at=row["updated_at"], ended_at=row["ended_at"])


def best(spec: SweepSpec, trials: list[TrialInfo]) -> TrialInfo | None:
    """The complete trial with the best value for the metric's goal (the first of equals)."""
    done = [t for t in trials if t.state is TrialState.COMPLETE and t.value is not None]
    if not done:
        return None
    sign = -1.0 if spec.metric.goal == "maximize" else 1.0
    return min(done, key=lambda t: (sign * t.value, t.number))  # type: ignore[operator]
