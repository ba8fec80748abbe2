"""The leader's sweep loop: each tick, every running sweep is brought forward.

Per sweep: 1 each running trial's metric, step by step, goes to the Optuna study
(``trial.report``); a trial the early-stopping rule condemns is marked pruned and
its job cancelled; a trial whose job ended is told to the study (complete with its
value, or failed); 2 too many failures end the sweep; 3 new trials are asked of
the study and submitted as jobs, up to ``parallel`` at once and ``trials`` in all;
4 once all have ended, the sweep ends with its best trial.

The study lives in memory and is rebuilt from the trials' rows when this server
gains the lease (a restart, a new leader): the sampler sees every trial so far,
and the pruner every step it was told.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from trainyard.crashpoints import crash_point
from trainyard.errors import TrainyardError
from trainyard.services.notify import Notifier
from trainyard.services.sweeps import SweepService, best
from trainyard.services.ticker import Ticker
from trainyard.spec.records import JobInfo
from trainyard.spec.sweep import Param, SweepSpec, SweepStatus, TrialInfo, TrialState
from trainyard.status import JobStatus
from trainyard.store.sweeps import SweepEnded, SweepRow, stop_reason

log = logging.getLogger("trainyard.sweeps")
TICK = 2.0  # seconds between looks at every running sweep (a trial's job news wakes the loop sooner)


@dataclass
class Search:
    """One sweep's Optuna study and the handles of its running trials (rebuilt from the rows when lost)."""

    study: Any
    distributions: dict[str, Any]
    running: dict[int, Any] = field(default_factory=dict)  # trial number -> optuna.Trial


class SweepLoop(Ticker):
    name = "trainyard-sweeps"
    log = log

    def __init__(self, service: SweepService, notifier: Notifier, tick: float = TICK) -> None:
        super().__init__(notifier)
        self.service = service
        self.sweeps = service.sweeps
        self.tick = tick
        self._searches: dict[str, Search] = {}
        self._jobs: set[str] = set()  # running trials' jobs: their news wakes the loop

    def pause(self) -> float:
        return self.tick

    def on_notify(self, key: str) -> bool:
        return key in self._jobs

    def start(self) -> None:
        self._searches.clear()  # a new term as leader: studies are rebuilt from what the database holds
        super().start()

    def cycle(self) -> None:
        rows = self.sweeps.live()
        for gone in set(self._searches) - {r["id"] for r in rows}:
            del self._searches[gone]
        jobs: set[str] = set()
        for row in rows:
            try:
                jobs |= self.reconcile(row)
            except Exception:
                log.exception("sweep %s: reconcile failed", row["id"])
        self._jobs = jobs
        for job_id, why in self.sweeps.strays():  # a crash came between a trial's end and its job's stop
            log.info("stopping job %s: its trial has ended", job_id)
            self.service.jobs.stop(job_id, why, by="system")

    # -- one sweep ------------------------------------------------------------------

    def reconcile(self, row: SweepRow) -> set[str]:
        """One sweep's step forward; the jobs of its trials still running."""
        sid, spec = row["id"], row["spec"]
        trials = self.sweeps.trials(sid)
        search = self._searches.get(sid)
        if search is None:
            try:  # Optuna checks a range as it is given one: a range stored before Param's checks raises here
                distributions = {k: _distribution(p) for k, p in spec.searched().items()}
            except Exception as e:
                self._unsampled(sid, len(trials), e)
                return set()
            search = self._rebuild(sid, spec, trials, distributions)
        self._searches[sid] = search
        running = [t for t in trials if t.state is TrialState.RUNNING]
        jobs = {j.id: j for j in self.service.store.get_jobs([t.job_id for t in running])}
        for trial in running:
            if trial.job_id in jobs:
                self._follow(sid, spec, search, trial, jobs[trial.job_id])
        trials = self.sweeps.trials(sid)
        count = {s: sum(t.state is s for t in trials) for s in TrialState}
        if count[TrialState.FAILED] >= spec.failures_allowed and count[TrialState.COMPLETE] == 0:
            self._end(sid, SweepStatus.FAILED, f"{count[TrialState.FAILED]} trials failed and none completed "
                      f"(max_failures {spec.failures_allowed}); see their jobs' logs")
            return set()
        started = len(trials)
        if count[TrialState.RUNNING] < spec.parallel and started < spec.max_trials \
                and self.sweeps.get(sid)["status"] is not SweepStatus.RUNNING:
            return set()  # cancelled since this cycle read it: its trials were stopped, none is started
        jobs_running = {t.job_id for t in trials if t.state is TrialState.RUNNING}
        while count[TrialState.RUNNING] < spec.parallel and started < spec.max_trials:
            try:
                handle = self._ask(spec, search, started)
            except Exception as e:  # … or as it samples one: said once, not raised again every tick
                self._unsampled(sid, started, e)
                return set()
            try:
                job_id = self._start_trial(row, search, started, handle)
            except (TrainyardError, ValidationError) as e:  # its queue gone, no node fits it any more, its job
                # stored before a check it fails: said, not retried each tick
                self._end(sid, SweepStatus.FAILED, f"trial {started} could not be submitted: {_why(e)}")
                return set()
            if job_id is None:  # cancelled as it was submitted: nothing was stored
                return set()
            jobs_running.add(job_id)
            started += 1
            count[TrialState.RUNNING] += 1
        if count[TrialState.RUNNING] == 0:  # none was started either: ``trials`` is what there is
            done = best(spec, trials)
            if done is None:
                self._end(sid, SweepStatus.FAILED, f"no trial logged a value of {spec.metric.name}")
            else:
                self._end(sid, SweepStatus.SUCCEEDED, f"best: trial {done.number}, {spec.metric.name} "
                          f"{done.value:.6g}")
            return set()
        self.sweeps.note(sid, _progress(spec, count, best(spec, trials)))
        return jobs_running

    def _follow(self, sid: str, spec: SweepSpec, search: Search, trial: TrialInfo, job: JobInfo) -> None:
        """Tell the study what ``trial`` logged since the last look; end it if its job ended, prune it if
        the early-stopping rule says so."""
        from optuna.trial import TrialState as Told

        handle = search.running.get(trial.number)
        points = self._points(spec, job)
        reported = self.sweeps.reported(sid, trial.number)
        new = [(s, v) for s, v in points if s not in reported]
        for step, value in new:
            if handle is not None:
                handle.report(value, step)
            reported[step] = value
        value = _value(spec, points)
        last = points[-1][0] if points else None
        if job.status.is_terminal():
            search.running.pop(trial.number, None)
            if job.status is JobStatus.SUCCEEDED and value is not None:
                self.sweeps.update_trial(sid, trial.number, state=TrialState.COMPLETE, value=value, step=last,
                                         reported=reported)
                if handle is not None:
                    search.study.tell(handle, value)
                return
            why = (f"logged no value of {spec.metric.name}" if job.status is JobStatus.SUCCEEDED
                   else f"its job {job.status.value}" + (f": {job.reason}" if job.reason else ""))
            self.sweeps.update_trial(sid, trial.number, state=TrialState.FAILED, value=value, step=last,
                                     reported=reported, reason=why)
            if handle is not None:
                search.study.tell(handle, state=Told.FAIL)
            return
        if new:
            self.sweeps.update_trial(sid, trial.number, value=value, step=last, reported=reported)
        if handle is not None and new and spec.early_stopping is not None and handle.should_prune():
            why = f"stopped early at step {last} by the {spec.early_stopping.type} rule"
            if self.sweeps.update_trial(sid, trial.number, state=TrialState.PRUNED, reason=why):
                search.running.pop(trial.number, None)
                search.study.tell(handle, state=Told.PRUNED)
                self.service.jobs.stop(job.id, stop_reason(why, sid), by="system")

    def _points(self, spec: SweepSpec, job: JobInfo) -> list[tuple[int, float]]:
        """The metric's (step, value) by step from the job's newest attempt (replica 0): a retried trial
        starts again. A point without a step counts as the next one."""
        points = self.service.store.metrics(job.id, name=spec.metric.name)
        newest = max((p.attempt for p in points), default=None)
        by_step: dict[int, float] = {}
        for p in points:
            if p.attempt == newest and p.replica == 0:
                by_step[p.step if p.step is not None else len(by_step)] = p.value
        return sorted(by_step.items())

    def _ask(self, spec: SweepSpec, search: Search, number: int) -> Any:
        """The study's trial ``number`` (an ``optuna.Trial``): the next combination of a grid, else sampled."""
        if spec.method == "grid":
            search.study.enqueue_trial(spec.grid()[number])
        return search.study.ask(search.distributions)

    def _start_trial(self, row: SweepRow, search: Search, number: int, handle: Any) -> str | None:
        """Submit trial ``number`` with the params the study gave ``handle``: its job's id, stored with the
        trial's row in one transaction; None, storing neither, if the sweep was cancelled meanwhile."""
        spec = row["spec"]
        params = dict(handle.params)
        try:
            job = self.service.jobs.submit(spec.trial_job(number, params, row["id"], stored=True), row["snapshot"],
                                           on_behalf=(row["owner"], row["team"]),
                                           link=lambda tx, job_id: self.sweeps.add_trial(tx, row["id"], number,
                                                                                          job_id, params))
        except SweepEnded:
            return None
        crash_point("sweep.trial_submitted")
        search.running[number] = handle
        log.info("sweep %s: trial %d is job %s with %s", row["id"], number, job.id, params)
        return job.id

    def _unsampled(self, sid: str, number: int, e: Exception) -> None:
        log.warning("sweep %s: trial %d could not be sampled", sid, number, exc_info=e)
        self._end(sid, SweepStatus.FAILED, f"trial {number} could not be sampled from the parameters: "
                  f"{type(e).__name__}: {e}"[:1000])

    def _end(self, sid: str, status: SweepStatus, reason: str) -> None:
        said = f"the sweep ended: {reason}"
        if (jobs := self.sweeps.end(sid, status, reason, said)) is not None:
            self.service.stop_jobs(jobs, stop_reason(said, sid), by="system")
            log.info("sweep %s %s: %s", sid, status.value, reason)
        self._searches.pop(sid, None)

    # -- the study -------------------------------------------------------------------

    def _rebuild(self, sid: str, spec: SweepSpec, trials: list[TrialInfo], distributions: dict[str, Any]) -> Search:
        import optuna
        from optuna.trial import TrialState as Told
        from optuna.trial import create_trial

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = (optuna.samplers.TPESampler(seed=spec.seed) if spec.method == "tpe"
                   else optuna.samplers.RandomSampler(seed=spec.seed))
        study = optuna.create_study(direction=spec.metric.goal, sampler=sampler, pruner=_pruner(spec))
        search = Search(study, distributions)
        told = {TrialState.COMPLETE: Told.COMPLETE, TrialState.PRUNED: Told.PRUNED, TrialState.FAILED: Told.FAIL,
                TrialState.CANCELLED: Told.FAIL, TrialState.RUNNING: Told.RUNNING}
        for t in trials:  # in number order: the study numbers them alike
            params = {k: v for k, v in t.params.items() if k in search.distributions}
            reported = self.sweeps.reported(sid, t.number)
            study.add_trial(create_trial(
                state=told[t.state], params=params, distributions=search.distributions,
                value=t.value if t.state is TrialState.COMPLETE else None, intermediate_values=reported))
            if t.state is TrialState.RUNNING:
                search.running[t.number] = optuna.trial.Trial(study, study.trials[-1]._trial_id)
        return search


def _distribution(p: Param) -> Any:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if p.values is not None:
        return CategoricalDistribution(p.values)
    if p.integer:
        return IntDistribution(int(p.min), int(p.max), log=p.log, step=int(p.step or 1))  # type: ignore[arg-type]
    return FloatDistribution(p.min, p.max, log=p.log, step=p.step)  # type: ignore[arg-type]


def _pruner(spec: SweepSpec) -> Any:
    import optuna

    rule = spec.early_stopping
    if rule is None:
        return optuna.pruners.NopPruner()
    if rule.type == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=rule.min_trials, n_warmup_steps=rule.warmup_steps)
    return optuna.pruners.HyperbandPruner(min_resource=rule.min_steps, max_resource=rule.max_steps,
                                          reduction_factor=rule.reduction_factor)


def _why(e: TrainyardError | ValidationError) -> str:
    if isinstance(e, TrainyardError):
        return e.message
    return "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg'].removeprefix('Value error, ')}" for x in e.errors())


def _value(spec: SweepSpec, points: list[tuple[int, float]]) -> float | None:
    if not points:
        return None
    if spec.metric.use == "last":
        return points[-1][1]
    pick = max if spec.metric.goal == "maximize" else min
    return pick(v for _, v in points)


def _progress(spec: SweepSpec, count: dict[TrialState, int], top: TrialInfo | None) -> str:
    parts = [f"{count[TrialState.RUNNING]} running", f"{count[TrialState.COMPLETE]} complete"]
    parts += [f"{count[s]} {s.value}" for s in (TrialState.PRUNED, TrialState.FAILED) if count[s]]
    text = ", ".join(parts) + f" of {spec.max_trials}"
    if top is not None:
        text += f"; best so far: trial {top.number}, {spec.metric.name} {top.value:.6g}"
    return text
