"""Pipeline runs: create (everything checked first), advance, cancel, retry.

A run's steps become ordinary jobs submitted through the JobService, so they
go through the same scheduler as any job. A step is submitted as soon as every
step it needs has succeeded (or was cached). The runner thread advances a run
when one of its jobs is notified (see :class:`~trainyard.services.notify.Notifier`),
not on a poll; a slow sweep only catches what a restart may have missed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import suppress
from typing import Any, Callable

from trainyard.artifact_paths import under_url
from trainyard.artifacts.store import ArtifactStore
from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller, visible
from trainyard.errors import Conflict, Forbidden, InvalidSpec, PipelineRunNotFound, TrainyardError
from trainyard.launch.files import local_path
from trainyard.pipelines.special import expand_step
from trainyard.services import pipeline_serve as serving_steps
from trainyard.services.jobs import JobService
from trainyard.services.notify import FOLLOWER_POLL, Notifier, off_loop
from trainyard.services import store_inputs
from trainyard.services.pipeline_steps import Steps
from trainyard.services.ticker import Ticker
from trainyard.spec import input_urls
from trainyard.spec.job import JobSpec
from trainyard.spec.labels import not_own
from trainyard.spec.pipeline import Errors, PipelineSpec, is_special, merge_params, parse_pipeline
from trainyard.spec.pipeline_graph import Graph, build
from trainyard.spec.pipeline_records import (PipelineArtifact, PipelineRunInfo, PipelineRunPage, RunStatus,
                                             StepStatus)
from trainyard.store import Store
from trainyard.store.pipelines import PipelineStore
from trainyard.store.store import Link

log = logging.getLogger("trainyard.pipelines")
SERVE_POLL = 0.5  # seconds between two looks at a serve step's service while it waits for a ready replica


def host_path_refused(url: str, caller: Caller, store_url: str) -> str | None:
    """Why ``caller`` may not name ``url``, a path on the server's host, as a step's input, or None.

    The server looks at such a path itself, as its own account, to see when it changes
    (:func:`trainyard.services.pipeline_io.fingerprint`): for a user of a server with users, a look at files their
    jobs may not read (whether one is there, its size and time). An admin may; the others name remote stores,
    other steps' outputs, values, or outputs in the artifact store (which :mod:`store_inputs` vets as for a job).
    Without users the one caller is the server's own admin."""
    if caller.admin or local_path(url) is None or under_url(url, store_url) is not None:
        return None
    return (f"{url[:200]!r} is a path on the server's host, which only an admin's pipeline may name on a server with "
            "users: give a remote store's URL (s3://…), another step's output ({{steps.S.outputs.NAME}}), or "
            "{value: …}")


class PipelineService(Ticker):
    name = "trainyard-pipelines"
    log = log

    def __init__(self, store: Store, jobs: JobService, artifacts: ArtifactStore, notifier: Notifier,
                 catalog: Callable[[], Any] | None = None, sweep_every: float = 5.0, images: bool = True) -> None:
        """``images``: whether this server has a container runtime for a component's image (not with
        ``--container-runtime none``)."""
        self.runs = PipelineStore(store)
        self.store = store
        self.jobs = jobs
        self.artifacts = artifacts
        super().__init__(notifier)
        self._catalog_factory = catalog
        self._catalog: Any = None
        self.images = images
        self.sweep_every = sweep_every
        self._job_runs: dict[str, str] = {}  # live step job -> its run
        self._dirty_runs: set[str] = set()
        self._dirty_jobs: set[str] = set()
        self._lock = threading.Lock()
        self._dirty_lock = threading.Lock()
        self._last_sweep = time.monotonic()
        self.serving: Any = None  # the ServingService serve steps apply to (bound by the platform)
        self._serving: set[str] = set()  # runs with a serve step waiting for a ready replica
        self.steps = Steps(self)

    # -- requests -------------------------------------------------------------

    def create(self, raw: dict[str, Any], params: dict[str, Any] | None = None,
               workdirs: dict[str, str] | None = None, source: str | None = None,
               caller: Caller = LOCAL_ADMIN, lines: dict | None = None, link: Link | None = None) -> PipelineRunInfo:
        """Check the whole pipeline (graph, every step's job and queue, snapshots), store the run, start it.

        Nothing is stored or run when anything is wrong. The run and its steps' jobs belong to the
        caller and the one team whose queues its steps use (see :func:`run_team`). ``lines``: where each key
        of ``raw`` was written (:func:`trainyard.spec.lines.compose`), so errors name the user's lines.
        ``link``: what names the run, stored with it (``PipelineStore.create_run``)."""
        spec, merged, graph, team = self.check(raw, params, workdirs, source, caller, lines)
        workdirs = dict(workdirs or {})
        run_id = self.runs.create_run(name=spec.name, spec=raw, params=merged, workdirs=workdirs, source=source,
                                      warnings=graph.warnings, instances=graph.instances, owner=caller.user,
                                      team=team, link=link)
        self.jobs.audit.record(caller, "pipeline.run", run_id, name=spec.name, team=team)
        for w in graph.warnings:
            log.warning("run %s: %s", run_id, w)
        self.advance(run_id)
        return self.runs.get_run(run_id)

    def check(self, raw: dict[str, Any], params: dict[str, Any] | None = None,
              workdirs: dict[str, str] | None = None, source: str | None = None,
              caller: Caller = LOCAL_ADMIN, lines: dict | None = None,
              ) -> tuple[PipelineSpec, dict[str, Any], Graph, str | None]:
        """Everything :meth:`create` checks, without storing: the spec, its params in effect, its steps, the
        team a run of it belongs to."""
        src = source or "<pipeline>"
        spec = parse_pipeline(raw, src, lines)
        merged = merge_params(spec, params, src)
        specials = any(is_special(s) for s in spec.steps.values())
        graph: Graph = build(spec, merged, lines=lines, source=src, expand=self._expander() if specials else None)
        workdirs = dict(workdirs or {})
        errs = Errors(src, lines)
        placed: list[tuple[tuple[str, ...], str, str | None]] = []  # each step's (field, queue, team)
        wanted: list[tuple[tuple[str, ...], dict[str, str]]] = []  # each job step's secrets
        for inst in graph.instances:
            loc = ("steps", inst.step)
            for n, i in inst.inputs.items():
                why = host_path_refused(i["url"], caller, self.artifacts.url) if i.get("kind") == "path" else None
                if why is not None:
                    errs.add((*loc, "inputs", n), why)
            if serving_steps.is_serve_step(inst.job):
                for field, message in serving_steps.check(self.serving, inst.job, "model" in inst.inputs, caller):
                    errs.add((*loc, *field.split(".")), message)
                queue = serving_steps.queue_of(inst.job)
                with suppress(TrainyardError):  # a queue the caller may not use: the service's check said why
                    placed.append(((*loc, "serve", "queue"), queue, self.jobs.team_for(caller, queue)))
            code = workdirs.get(inst.workdir)
            if code is None and inst.workdir != ".":
                errs.add((*loc, "workdir"), f"no code snapshot was uploaded for workdir {inst.workdir!r}")
            elif code is not None and not self.artifacts.has_snapshot(code):
                errs.add((*loc, "workdir"), f"snapshot {code} was not uploaded")
            if serving_steps.is_serve_step(inst.job):
                continue
            job = JobSpec.model_validate({**inst.job, "inputs": {n: "/" for n in inst.inputs}})
            if (why := not_own(job.labels)) is not None:
                errs.add((*loc, "labels"), why)
            given = {n: i["url"] for n, i in inst.inputs.items() if i.get("kind") == "path"}
            for n, url in given.items():
                if (why := input_urls.why_not(url)) is not None:
                    errs.add((*loc, "inputs", n), why)
            try:
                store_inputs.check_for(self.jobs, given, caller, "inputs")
            except InvalidSpec as e:
                errs.add((*loc, *e.errors[0]["field"].split(".")), e.errors[0]["message"])
            try:
                placed.append(((*loc, "queue"), job.queue, self.jobs.team_for(caller, job.queue)))
                wanted.append((loc, job.secrets))
                self.jobs.check_priority(caller, job)  # no higher than the step's queue allows the caller
                self.jobs.engine.validate(job)
            except InvalidSpec as e:  # an unknown queue, or another team's: queue
                for err in e.errors:
                    errs.add((*loc, *str(err.get("field") or "").split(".")), err["message"])
            except TrainyardError as e:  # a role that may not submit (queue), a priority above the queue's (priority)
                field = str(e.details.get("field") or "")
                errs.add((*loc, field), e.message.removeprefix(f"{field}: ") if field else e.message)
            problem = self.jobs.placement_problem(job)
            if problem is not None:
                errs.add((*loc, problem[0]), problem[1])
        team = run_team(placed, errs, across=caller.admin)
        for loc, secrets in wanted:  # read from the run's team when its steps run
            try:
                self.jobs.check_secrets(secrets, team)
            except InvalidSpec as e:  # a secret the team lacks: secrets.VAR
                for err in e.errors:
                    errs.add((*loc, *str(err.get("field") or "").split(".")), err["message"])
        errs.raise_if_any()
        return spec, merged, graph, team

    def _expander(self) -> Callable[[str, dict, dict], Any]:
        if self._catalog is None:
            self._catalog = self._catalog_factory() if self._catalog_factory else None
        return lambda name, raw, params: expand_step(name, raw, self._catalog, params, self.images)

    def _changeable(self, run_id: str, caller: Caller) -> PipelineRunInfo:
        run = self.get(run_id, caller)
        if not caller.may(Action.CANCEL_OWN, run.team, run.owner):
            raise Forbidden(f"you may cancel or retry only your own runs; {run_id} is {run.owner}'s", run_id=run_id)
        return run

    def cancel(self, run_id: str, caller: Caller = LOCAL_ADMIN) -> PipelineRunInfo:
        """Stop every running step (their jobs are cancelled) and start nothing more."""
        self._changeable(run_id, caller)
        self.jobs.audit.record(caller, "pipeline.cancel", run_id)
        if self.runs.move_run(run_id, RunStatus.CANCELLING, by="user", reason="cancel requested"):
            self.advance(run_id)
            # once more: a step whose job was pending was cancelled at once, and on a follower no runner
            # hears that (the leader's finds it at its next sweep)
            self.advance(run_id)
        return self.runs.get_run(run_id)

    def delete(self, run_id: str, caller: Caller = LOCAL_ADMIN) -> None:
        """An ended run with its steps' jobs (records and files, as ``trainyard rm``) and its artifacts' records;
        Conflict saying why for one still running, or whose outputs another run reuses."""
        run = self.get(run_id, caller)
        if not caller.may(Action.CANCEL_OWN, run.team, run.owner):
            raise Forbidden(f"you may delete only your own runs; {run_id} is {run.owner}'s", run_id=run_id)
        if (why := self.jobs.remover.why_not_run(run_id, run.status.value, visible(caller))) is not None:
            raise Conflict(f"pipeline run {run_id} cannot be deleted: {why}", run_id=run_id)
        if self.jobs.remover.remove_run(run_id) is None:
            raise Conflict(f"pipeline run {run_id} changed meanwhile; look again", run_id=run_id)
        self.jobs.audit.record(caller, "pipeline.delete", run_id, name=run.name, status=run.status.value)

    def retry(self, run_id: str, caller: Caller = LOCAL_ADMIN) -> PipelineRunInfo:
        """Run the failed, cancelled and skipped steps again; what succeeded is kept."""
        run = self._changeable(run_id, caller)
        if not run.status.is_terminal() or run.status == RunStatus.SUCCEEDED:
            said = "succeeded: nothing to run again" if run.status == RunStatus.SUCCEEDED else \
                f"is still {run.status.value}: retry it once it has ended"
            raise Conflict(f"run {run_id} {said} (only a failed or cancelled run can be retried)", run_id=run_id)
        if not self.runs.reset_for_retry(run_id):
            raise Conflict(f"run {run_id} changed meanwhile; look again", run_id=run_id)
        self.jobs.audit.record(caller, "pipeline.retry", run_id)
        self.advance(run_id)
        return self.runs.get_run(run_id)

    # -- looking up -------------------------------------------------------------

    def list_runs(self, *, status: list[str] | None, limit: int, cursor: str | None,
                  caller: Caller = LOCAL_ADMIN, name: str | None = None, until: float | None = None,
                  exact_name: str | None = None) -> PipelineRunPage:
        return self.runs.list_runs(status=status, limit=limit, cursor=cursor, visible=visible(caller), name=name,
                                   until=until, exact_name=exact_name)

    def get(self, run_id: str, caller: Caller = LOCAL_ADMIN) -> PipelineRunInfo:
        """The run, if the caller may see it: another team's run is not found."""
        run = self.runs.get_run(run_id)
        if not caller.sees(run.team, run.owner):
            raise PipelineRunNotFound(f"no such pipeline run: {run_id}", run_id=run_id)
        return run

    def find_artifact(self, key: str, caller: Caller = LOCAL_ADMIN) -> PipelineArtifact:
        """A step artifact by id or digest (or a unique prefix), with its lineage; only of runs the caller sees."""
        return self.runs.find_artifact(key, visible(caller))

    async def wait(self, run_id: str, timeout: float, changed_after: float | None = None,
                   caller: Caller = LOCAL_ADMIN) -> str:
        """The run as JSON once it has ended (or, with ``changed_after``, once its ``updated_at`` passed
        that), or as it is after ``timeout``. JSON: the caller sends it as it is, without validating again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            seen = self.notifier.version(run_id)
            run = await off_loop(self.get, run_id, caller)
            left = deadline - loop.time()
            moved = changed_after is not None and run.updated_at > changed_after
            if run.status.is_terminal() or moved or left <= 0:
                return run.model_dump_json()
            # any server moves a run it is asked to cancel or retry, and only its own waiters hear that: few
            # wait on runs, so each looks again as a follower's do, not only when notified
            await self.notifier.wait(run_id, seen, min(left, FOLLOWER_POLL))

    # -- advancing --------------------------------------------------------------

    def advance(self, run_id: str) -> None:
        """Move a run on as far as it can go now. Safe to call any time, any number of times."""
        with self._lock:  # one advance at a time: the runner thread and request threads both call this
            changed = self._advance(run_id)
        if changed:
            self.notifier.notify(run_id)
            # once more from the runner: a job submitted here may have ended before it was known as a step's
            with self._dirty_lock:
                self._dirty_runs.add(run_id)
            self.wake()

    def _advance(self, run_id: str) -> bool:
        run = self.runs.get_run(run_id)
        if run.status.is_terminal():
            return False
        state = {s.name: s.state for s in run.steps}
        produced = {s.name: dict(s.artifacts) for s in run.steps}
        changed = self.steps.collect(run, state, produced)
        if run.status == RunStatus.CANCELLING:
            for s in run.steps:
                if state[s.name] == StepStatus.SUBMITTED and serving_steps.is_serve_step(s.job):
                    if self.runs.move_step(run_id, s.name, StepStatus.CANCELLED, ended_at=time.time(),
                                           reason="the run was cancelled; the service stays as applied"):
                        state[s.name] = StepStatus.CANCELLED
                elif state[s.name] == StepStatus.SUBMITTED and s.status not in ("cancelling", "cancelled"):
                    self.jobs.stop(s.job_id, f"pipeline run {run_id} was cancelled")
                elif state[s.name] == StepStatus.WAITING:
                    if self.runs.move_step(run_id, s.name, StepStatus.CANCELLED, reason="the run was cancelled"):
                        state[s.name] = StepStatus.CANCELLED
        else:
            changed |= self.steps.start_ready(run, state, produced)
        waiting = any(state[s.name] == StepStatus.SUBMITTED and serving_steps.is_serve_step(s.job) for s in run.steps)
        (self._serving.add if waiting else self._serving.discard)(run_id)
        if any(v in (StepStatus.WAITING, StepStatus.SUBMITTED) for v in state.values()):
            return changed
        if run.status == RunStatus.CANCELLING:
            self.runs.move_run(run_id, RunStatus.CANCELLED, reason="cancelled")
        elif all(v.is_done() for v in state.values()):
            cached = sum(v == StepStatus.CACHED for v in state.values())
            self.runs.move_run(run_id, RunStatus.SUCCEEDED,
                               reason=f"{len(state)} steps succeeded" + (f" ({cached} cached)" if cached else ""))
        else:
            failed = [s for s in run.steps if state[s.name] in (StepStatus.FAILED, StepStatus.CANCELLED)]
            first = failed[0] if failed else None
            why = "steps were skipped"
            if first is not None:  # its reason as recorded in this advance
                why = f"step {first.name} {state[first.name].value}: {self.runs.get_run(run_id).step(first.name).reason}"
            self.runs.move_run(run_id, RunStatus.FAILED, reason=why)
        return True

    # -- the runner thread ------------------------------------------------------

    def start(self) -> None:
        self._job_runs.update(self.runs.live_jobs())
        self._dirty_runs.update(self.runs.active_runs())
        super().start()

    def on_notify(self, key: str) -> bool:
        if key not in self._job_runs:  # a dict lookup: this runs in whoever notified
            return False
        with self._dirty_lock:
            self._dirty_jobs.add(key)
        return True

    def pause(self) -> float:
        # nothing notifies when a replica becomes ready: a run with a serve step waiting is looked at often
        return SERVE_POLL if self._serving else self.sweep_every

    def cycle(self) -> None:
        sweep = time.monotonic() - self._last_sweep >= self.sweep_every
        if sweep:
            self._last_sweep = time.monotonic()
        with self._dirty_lock:
            jobs, self._dirty_jobs = self._dirty_jobs, set()
            runs, self._dirty_runs = self._dirty_runs, set()
        for job_id, (status, _) in self.runs.job_statuses(sorted(jobs)).items():
            if status in ("succeeded", "failed", "cancelled") and job_id in self._job_runs:
                runs.add(self._job_runs[job_id])
        runs.update(self._serving)
        if sweep:
            runs.update(self.runs.active_runs())
        for run_id in sorted(runs):
            try:
                self.advance(run_id)
            except Exception:
                log.exception("advancing run %s failed", run_id)


def run_team(placed: list[tuple[tuple[str, ...], str, str | None]], errs: Errors, across: bool = False) -> str | None:
    """The team a run belongs to, from each step's (field, queue, team its queue gives the caller): its steps'
    jobs and services are the run's, so they must all be that team's, as a job is its queue's team's. A step on
    the default queue of a caller in no team (an admin) goes with the others. Another team's queue is refused,
    but to an admin (``across``: without --auth, everyone), whose run across teams is no team's, as its jobs."""
    first = next((p for p in placed if p[2] is not None), None)
    if first is None:
        return None
    mixed = [(field, queue, team) for field, queue, team in placed if team is not None and team != first[2]]
    if mixed and across:
        return None
    for field, queue, team in mixed:
        errs.add(field, f"a run's steps use the queues of one team: queue {queue!r} is team {team}'s, "
                        f"while step {first[0][1]}'s queue {first[1]!r} is team {first[2]}'s")
    return first[2]
