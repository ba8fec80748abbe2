"""A pipeline run's steps: start those whose needs are done, record those whose jobs ended.

Split from :mod:`trainyard.services.pipelines`, which decides when a run is looked
at; this module decides what each step does then. A step is a job (submitted for
the run's owner, or taken from the cache when the same spec, code and inputs ran
before in a run of its team) or a serve step (a service applied over its model, done once ready).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from pydantic import ValidationError

from trainyard.crashpoints import crash_point
from trainyard.errors import TrainyardError
from trainyard.services import pipeline_io as io
from trainyard.services import pipeline_serve as serving_steps
from trainyard.spec.job import JobSpec
from trainyard.spec.labels import with_own
from trainyard.spec.pipeline_records import PipelineRunInfo, StepInfo, StepStatus
from trainyard.spec.submitted import STORED
from trainyard.store.pipelines import StepMoved

if TYPE_CHECKING:
    from trainyard.services.pipelines import PipelineService

log = logging.getLogger("trainyard.pipelines")
BAD = (StepStatus.FAILED, StepStatus.CANCELLED, StepStatus.SKIPPED)
_MESSAGE_MAX = 200  # of an attempt's message in a step's reason: the run's list shows it in a column
_VERB = {StepStatus.FAILED: "failed", StepStatus.CANCELLED: "was cancelled", StepStatus.SKIPPED: "was skipped"}


class Steps:
    """The step half of a :class:`PipelineService`; called only under its advance lock."""

    def __init__(self, service: PipelineService) -> None:
        self.service = service
        self.runs = service.runs
        self.store = service.store
        self.jobs = service.jobs
        self.artifacts = service.artifacts
        self._job_runs = service._job_runs

    def collect(self, run: PipelineRunInfo, state: dict[str, StepStatus], produced: dict[str, dict[str, str]]) -> bool:
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
                new = StepStatus.FAILED if s.status == "failed" else StepStatus.CANCELLED
                reason = self._job_ending(s.job_id, with_message=new == StepStatus.FAILED)
                if self.runs.move_step(run.id, s.name, new, reason=f"job {s.job_id}: {reason}", ended_at=time.time()):
                    state[s.name] = new
            changed = True
        return changed

    def _job_ending(self, job_id: str, *, with_message: bool) -> str | None:
        """The job's reason, with its last attempt's message: 'MissingOutput' alone does not say which output,
        nor 'ImagePullFailed' which image, and the run's tree and --follow show only the step's reason."""
        try:
            job = self.store.get_job(job_id)
        except TrainyardError:  # deleted meanwhile
            return None
        attempt = job.last_attempt
        message = (attempt.message or "").strip().splitlines()[:1] if attempt else []
        if not with_message or not message or message[0] in (job.reason or ""):
            return job.reason
        words = message[0] if len(message[0]) <= _MESSAGE_MAX else message[0][:_MESSAGE_MAX - 1] + "…"
        return f"{job.reason}: {words}"

    def _serve_progress(self, run: PipelineRunInfo, s: StepInfo, state: dict[str, StepStatus]) -> bool:
        now = time.time()
        out = serving_steps.progress(self.service.serving, s, now - (s.started_at or now))
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
            info, job = serving_steps.apply(self.service.serving, run, s, inputs["model"]["url"] if inputs else None)
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

    def start_ready(self, run: PipelineRunInfo, state: dict[str, StepStatus],
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
        hit = self.runs.find_cached(key, run.team) if s.cache else None
        if hit is not None and set(s.outputs) <= set(hit[1]):
            job_id, outputs = hit
            if self.runs.move_step(run.id, s.name, StepStatus.CACHED, inputs=inputs, cache_key=key,
                                   cached_from=job_id, artifacts=outputs, started_at=now, ended_at=now,
                                   reason=f"same spec, code and inputs as job {job_id}: its outputs are reused"):
                return StepStatus.CACHED, outputs
        try:
            job = {**s.job, "inputs": {n: r["url"] for n, r in inputs.items()}}
            if isinstance(job.get("labels") or {}, dict):  # labelled with its run and step: ls -l trainyard.io/step=…
                job["labels"] = with_own(job.get("labels") or {}, pipeline_run=run.id, step=s.step)
            spec = JobSpec.model_validate(job, context=STORED)  # checked with the run's spec when it was created
            recorded = {"inputs": inputs, "cache_key": key, "started_at": now}
            job = self.jobs.submit(spec, code, on_behalf=(run.owner, run.team),
                                   link=lambda tx, job: self.runs.submit_step(tx, run.id, s.name, job, **recorded))
            crash_point("pipeline.step_submitted")
        except StepMoved:  # another server moved the step first: its job was not stored
            return StepStatus.SUBMITTED, {}
        except (TrainyardError, ValidationError) as e:
            why = e.message if isinstance(e, TrainyardError) else "; ".join(
                f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
            self.runs.move_step(run.id, s.name, StepStatus.FAILED, reason=f"submit: {why}", ended_at=now)
            return StepStatus.FAILED, {}
        self._job_runs[job.id] = run.id
        return StepStatus.SUBMITTED, {}
