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
from typing import Any, Callable

from trainyard.artifacts.store import ArtifactStore
from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller, visible
from trainyard.errors import ArtifactNotFound, Conflict, Forbidden, PipelineRunNotFound, TrainyardError
from trainyard.pipelines.special import expand_step
from trainyard.scheduler.fit import check_fits_some_node
from trainyard.services import pipeline_io as io
from trainyard.services import pipeline_serve as serving_steps
from trainyard.services.jobs import JobService
from trainyard.services.notify import Notifier, off_loop
from trainyard.spec.job import JobSpec
from trainyard.spec.pipeline import Errors, PipelineSpec, is_special, merge_params, parse_pipeline
from trainyard.spec.pipeline_graph import Graph, build
from trainyard.spec.pipeline_records import (PipelineArtifact, PipelineRunInfo, PipelineRunPage, RunStatus, StepInfo,
                                             StepStatus)
from trainyard.store import Store
from trainyard.store.pipelines import PipelineStore

log = logging.getLogger("trainyard.pipelines")
BAD = (StepStatus.FAILED, StepStatus.CANCELLED, StepStatus.SKIPPED)
SERVE_POLL = 0.5  # seconds between two looks at a serve step's service while it waits for a ready replica
_VERB = {StepStatus.FAILED: "failed", StepStatus.CANCELLED: "was cancelled", StepStatus.SKIPPED: "was skipped"}


class PipelineService:
    def __init__(self, store: Store, jobs: JobService, artifacts: ArtifactStore, notifier: Notifier,
                 catalog: Callable[[], Any] | None = None, sweep_every: float = 5.0) -> None:
        self.runs = PipelineStore(store)
        self.store = store
        self.jobs = jobs
        self.artifacts = artifacts
        self.notifier = notifier
        self._catalog_factory = catalog
        self._catalog: Any = None
        self.sweep_every = sweep_every
        self._job_runs: dict[str, str] = {}  # live step job -> its run
        self._dirty_runs: set[str] = set()
        self._dirty_jobs: set[str] = set()
        self._lock = threading.Lock()
        self._dirty_lock = threading.Lock()
        self._event = threading.Event()
        self._stop = threading.Event()
        self._listening = False
        self._thread: threading.Thread | None = None
        self.serving: Any = None  # the ServingService serve steps apply to (bound by the platform)
        self._serving: set[str] = set()  # runs with a serve step waiting for a ready replica

    # -- requests -------------------------------------------------------------

    def create(self, raw: dict[str, Any], params: dict[str, Any] | None = None,
               workdirs: dict[str, str] | None = None, source: str | None = None,
               caller: Caller = LOCAL_ADMIN, lines: dict | None = None) -> PipelineRunInfo:
        """Check the whole pipeline (graph, every step's job and queue, snapshots), store the run, start it.

        Nothing is stored or run when anything is wrong. The run and its steps' jobs belong to the
        caller and the team its default queue gives it. ``lines``: where each key of ``raw`` was written
        (:func:`trainyard.spec.lines.compose`), so errors name the user's lines."""
        spec, merged, graph = self.check(raw, params, workdirs, source, caller, lines)
        workdirs = dict(workdirs or {})
        team = self.jobs.team_for(caller, "default")
        run_id = self.runs.create_run(name=spec.name, spec=raw, params=merged, workdirs=workdirs, source=source,
                                      warnings=graph.warnings, instances=graph.instances, owner=caller.user,
                                      team=team)
        self.jobs.audit.record(caller, "pipeline.run", run_id, name=spec.name, team=team)
        for w in graph.warnings:
            log.warning("run %s: %s", run_id, w)
        self.advance(run_id)
        return self.runs.get_run(run_id)

    def check(self, raw: dict[str, Any], params: dict[str, Any] | None = None,
              workdirs: dict[str, str] | None = None, source: str | None = None,
              caller: Caller = LOCAL_ADMIN, lines: dict | None = None) -> tuple[PipelineSpec, dict[str, Any], Graph]:
        """Everything :meth:`create` checks, without storing: the spec, its params in effect, its steps."""
        src = source or "<pipeline>"
        spec = parse_pipeline(raw, src, lines)
        merged = merge_params(spec, params, src)
        specials = any(is_special(s) for s in spec.steps.values())
        graph: Graph = build(spec, merged, lines=lines, source=src, expand=self._expander() if specials else None)
        workdirs = dict(workdirs or {})
        errs = Errors(src, lines)
        for inst in graph.instances:
            loc = ("steps", inst.step)
            if serving_steps.is_serve_step(inst.job):
                for field, message in serving_steps.check(self.serving, inst.job, "model" in inst.inputs, caller):
                    errs.add((*loc, *field.split(".")), message)
            code = workdirs.get(inst.workdir)
            if code is None and inst.workdir != ".":
                errs.add((*loc, "workdir"), f"no code snapshot was uploaded for workdir {inst.workdir!r}")
            elif code is not None and not self.artifacts.has_snapshot(code):
                errs.add((*loc, "workdir"), f"snapshot {code} was not uploaded")
            if serving_steps.is_serve_step(inst.job):
                continue
            job = JobSpec.model_validate({**inst.job, "inputs": {n: "/" for n in inst.inputs}})
            try:
                self.jobs.team_for(caller, job.queue)
                self.jobs.engine.validate(job)
            except TrainyardError as e:
                errs.add((*loc, str(e.details.get("field") or "")), e.message)
            problem = check_fits_some_node(job, self.jobs.engine.nodes())
            if problem is not None:
                errs.add((*loc, problem[0]), problem[1])
        errs.raise_if_any()
        return spec, merged, graph

    def _expander(self) -> Callable[[str, dict, dict], Any]:
        if self._catalog is None:
            self._catalog = self._catalog_factory() if self._catalog_factory else None
        return lambda name, raw, params: expand_step(name, raw, self._catalog, params)

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
        return self.runs.get_run(run_id)

    def retry(self, run_id: str, caller: Caller = LOCAL_ADMIN) -> PipelineRunInfo:
        """Run the failed, cancelled and skipped steps again; what succeeded is kept."""
        run = self._changeable(run_id, caller)
        if not run.status.is_terminal() or run.status == RunStatus.SUCCEEDED:
            raise Conflict(f"run {run_id} is {run.status.value}: only a failed or cancelled run can be retried",
                           run_id=run_id)
        if not self.runs.reset_for_retry(run_id):
            raise Conflict(f"run {run_id} changed meanwhile; look again", run_id=run_id)
        self.jobs.audit.record(caller, "pipeline.retry", run_id)
        self.advance(run_id)
        return self.runs.get_run(run_id)

    # -- looking up -------------------------------------------------------------

    def list_runs(self, *, status: list[str] | None, limit: int, cursor: str | None,
                  caller: Caller = LOCAL_ADMIN, name: str | None = None) -> PipelineRunPage:
        return self.runs.list_runs(status=status, limit=limit, cursor=cursor, visible=visible(caller), name=name)

    def get(self, run_id: str, caller: Caller = LOCAL_ADMIN) -> PipelineRunInfo:
        """The run, if the caller may see it: another team's run is not found."""
        run = self.runs.get_run(run_id)
        if not caller.sees(run.team, run.owner):
            raise PipelineRunNotFound(f"no such pipeline run: {run_id}", run_id=run_id)
        return run

    def find_artifact(self, key: str, caller: Caller = LOCAL_ADMIN) -> PipelineArtifact:
        """A step artifact by id or digest (or a unique prefix), with its lineage; only of runs the caller sees."""
        found = self.runs.find_artifact(key)
        try:
            self.get(found.run_id, caller)
        except PipelineRunNotFound:
            raise ArtifactNotFound(f"no artifact matches {key!r}", key=key) from None
        return found

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
            await self.notifier.wait(run_id, seen, left)

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
            self._event.set()

    def _advance(self, run_id: str) -> bool:
        run = self.runs.get_run(run_id)
        if run.status.is_terminal():
            return False
        state = {s.name: s.state for s in run.steps}
        produced = {s.name: dict(s.artifacts) for s in run.steps}
        changed = self._collect(run, state, produced)
        if run.status == RunStatus.CANCELLING:
            for s in run.steps:
                if state[s.name] == StepStatus.SUBMITTED and serving_steps.is_serve_step(s.job):
                    if self.runs.move_step(run_id, s.name, StepStatus.CANCELLED, ended_at=time.time(),
                                           reason="the run was cancelled; the service stays as applied"):
                        state[s.name] = StepStatus.CANCELLED
                elif state[s.name] == StepStatus.SUBMITTED and s.status not in ("cancelling", "cancelled"):
                    self.jobs.stop(s.job_id)
                elif state[s.name] == StepStatus.WAITING:
                    if self.runs.move_step(run_id, s.name, StepStatus.CANCELLED, reason="the run was cancelled"):
                        state[s.name] = StepStatus.CANCELLED
        else:
            changed |= self._start_ready(run, state, produced)
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

    def _collect(self, run: PipelineRunInfo, state: dict[str, StepStatus], produced: dict[str, dict[str, str]]) -> bool:
        """Record the steps whose jobs have ended."""
        changed = False
        for s in run.steps:
            if state[s.name] == StepStatus.SUBMITTED and serving_steps.is_serve_step(s.job):
                changed |= self._serve_progress(run, s, state)
                continue
            if state[s.name] != StepStatus.SUBMITTED or s.status not in ("succeeded", "failed", "cancelled"):
                continue
            self._job_runs.pop(s.job_id, None)
            if s.status == "succeeded":
                state[s.name], produced[s.name] = self._record_outputs(run, s)
            else:
                reason = self.runs.job_statuses([s.job_id]).get(s.job_id, (None, None))[1]
                new = StepStatus.FAILED if s.status == "failed" else StepStatus.CANCELLED
                if self.runs.move_step(run.id, s.name, new, reason=f"job {s.job_id}: {reason}", ended_at=time.time()):
                    state[s.name] = new
            changed = True
        return changed

    def _serve_progress(self, run: PipelineRunInfo, s: StepInfo, state: dict[str, StepStatus]) -> bool:
        now = time.time()
        out = serving_steps.progress(self.serving, s, now - (s.started_at or now))
        if out.state is None:
            return False
        if self.runs.move_step(run.id, s.name, out.state, reason=out.reason, ended_at=now):
            state[s.name] = out.state
        return True

    def _start_serve(self, run: PipelineRunInfo, s: StepInfo,
                     produced: dict[str, dict[str, str]]) -> tuple[StepStatus, dict[str, str]]:
        """Apply the step's service over its model; it is done once :meth:`_serve_progress` sees a ready replica."""
        now = time.time()
        try:
            arts = self.runs.artifacts([a for n in s.needs for a in produced.get(n, {}).values()])
            inputs = {n: io.resolve_input(self.artifacts, run.id, s.name, n, ref, produced, arts, self.store.artifacts)
                      for n, ref in s.inputs.items()}
            info, job = serving_steps.apply(self.serving, run, s, inputs["model"]["url"] if inputs else None)
        except TrainyardError as e:
            self.runs.move_step(run.id, s.name, StepStatus.FAILED, reason=f"serve: {e.message}", ended_at=now)
            return StepStatus.FAILED, {}
        except Exception as e:  # a model that cannot be made ready fails the step, not the runner
            log.exception("run %s: step %s could not start", run.id, s.name)
            self.runs.move_step(run.id, s.name, StepStatus.FAILED, reason=f"serve: {e}", ended_at=now)
            return StepStatus.FAILED, {}
        self.runs.move_step(run.id, s.name, StepStatus.SUBMITTED, job=job, inputs=inputs, started_at=now,
                            reason=f"service {info.name} version {info.version} applied: waiting for a ready replica")
        return StepStatus.SUBMITTED, {}

    def _record_outputs(self, run: PipelineRunInfo, s: StepInfo) -> tuple[StepStatus, dict[str, str]]:
        found, missing = io.output_artifacts(self.store.artifacts(s.job_id), s.outputs)
        now = time.time()
        if missing:
            self.runs.move_step(run.id, s.name, StepStatus.FAILED, ended_at=now,
                                reason=f"job {s.job_id} succeeded but did not write output(s): {', '.join(missing)}")
            return StepStatus.FAILED, {}
        lineage = {n: {k: r.get(k) for k in ("kind", "digest", "url", "artifacts", "step", "output", "subpath")
                       if r.get(k) is not None} for n, r in s.inputs.items()}
        arts = {}
        for name, f in found.items():
            art = self.runs.add_artifact(
                digest=f["digest"], run_id=run.id, step=s.name, job_id=s.job_id, attempt=f["attempt"], output=name,
                url=self.artifacts.outputs_url(s.job_id, f["attempt"]) + "/" + name, size=f["size"], files=f["files"],
                inputs=lineage, code=run.workdirs.get(s.workdir), cache_key=s.cache_key)
            arts[name] = art.id
        self.runs.move_step(run.id, s.name, StepStatus.SUCCEEDED, artifacts=arts, ended_at=now, reason=None)
        return StepStatus.SUCCEEDED, arts

    def _start_ready(self, run: PipelineRunInfo, state: dict[str, StepStatus],
                     produced: dict[str, dict[str, str]]) -> bool:
        """Submit (or take from the cache) every waiting step whose needs are done; skip those that cannot run."""
        changed, progress = False, True
        while progress:
            progress = False
            for s in run.steps:
                if state[s.name] != StepStatus.WAITING:
                    continue
                bad = [n for n in s.needs if state.get(n) in BAD]
                if bad:
                    if self.runs.move_step(run.id, s.name, StepStatus.SKIPPED,
                                           reason=f"needs {bad[0]}, which {_VERB[state[bad[0]]]}"):
                        state[s.name] = StepStatus.SKIPPED
                        progress = True
                elif all(state.get(n, StepStatus.WAITING).is_done() for n in s.needs):
                    state[s.name], produced[s.name] = self._start(run, s, produced)
                    progress = True
            changed |= progress
        return changed

    def _start(self, run: PipelineRunInfo, s: StepInfo,
               produced: dict[str, dict[str, str]]) -> tuple[StepStatus, dict[str, str]]:
        if serving_steps.is_serve_step(s.job):
            return self._start_serve(run, s, produced)
        now = time.time()
        try:
            arts = self.runs.artifacts([a for n in s.needs for a in produced.get(n, {}).values()])
            inputs = {n: io.resolve_input(self.artifacts, run.id, s.name, n, ref, produced, arts, self.store.artifacts)
                      for n, ref in s.inputs.items()}
            code = run.workdirs.get(s.workdir)
            key = io.cache_key(s.job, code, inputs, s.outputs)
        except Exception as e:  # an input that cannot be made ready fails the step, not the runner
            log.exception("run %s: step %s could not start", run.id, s.name)
            self.runs.move_step(run.id, s.name, StepStatus.FAILED, reason=f"inputs: {e}", ended_at=now)
            return StepStatus.FAILED, {}
        hit = self.runs.find_cached(key) if s.cache else None
        if hit is not None and set(s.outputs) <= set(hit[1]):
            job_id, outputs = hit
            if self.runs.move_step(run.id, s.name, StepStatus.CACHED, inputs=inputs, cache_key=key,
                                   cached_from=job_id, artifacts=outputs, started_at=now, ended_at=now,
                                   reason=f"same spec, code and inputs as job {job_id}: its outputs are reused"):
                return StepStatus.CACHED, outputs
        try:
            spec = JobSpec.model_validate({**s.job, "inputs": {n: r["url"] for n, r in inputs.items()}})
            job = self.jobs.submit(spec, code, on_behalf=(run.owner, run.team))
        except TrainyardError as e:
            self.runs.move_step(run.id, s.name, StepStatus.FAILED, reason=f"submit: {e.message}", ended_at=now)
            return StepStatus.FAILED, {}
        self._job_runs[job.id] = run.id
        if not self.runs.move_step(run.id, s.name, StepStatus.SUBMITTED, job_id=job.id, inputs=inputs,
                                   cache_key=key, started_at=now):
            self.jobs.stop(job.id)  # another server moved the step first
        return StepStatus.SUBMITTED, {}

    # -- the runner thread ------------------------------------------------------

    def start(self) -> None:
        self._job_runs.update(self.runs.live_jobs())
        self._dirty_runs.update(self.runs.active_runs())
        if not self._listening:
            self.notifier.listen(self._on_notify)
            self._listening = True
        self._stop.clear()  # a server that regains the lease starts its runner again
        self._thread = threading.Thread(target=self._run, name="trainyard-pipelines", daemon=True)
        self._thread.start()
        self._event.set()

    def stop(self) -> None:
        self._stop.set()
        self._event.set()
        if self._thread:
            self._thread.join(timeout=10)

    def _on_notify(self, key: str) -> None:
        if key in self._job_runs:  # a dict lookup: this runs in whoever notified
            with self._dirty_lock:
                self._dirty_jobs.add(key)
            self._event.set()

    def _run(self) -> None:
        last_sweep = time.monotonic()
        while not self._stop.is_set():
            # nothing notifies when a replica becomes ready: a run with a serve step waiting is looked at often
            self._event.wait(SERVE_POLL if self._serving else self.sweep_every)
            self._event.clear()
            if self._stop.is_set():
                return
            try:
                self._cycle(sweep=time.monotonic() - last_sweep >= self.sweep_every)
            except Exception:  # the runner must outlive any one bad cycle
                log.exception("pipeline runner cycle failed")
                time.sleep(0.2)
            if time.monotonic() - last_sweep >= self.sweep_every:
                last_sweep = time.monotonic()

    def _cycle(self, sweep: bool) -> None:
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
