"""Pipeline ``serve`` steps: apply a model-server service from the step's model, done once a replica is ready.

A serve step runs no job of its own. Once what it needs has succeeded, the runner builds the service
spec exactly as ``trainyard serve`` does (:meth:`~trainyard.spec.serve.ServeStep.service`) over the
model's artifact URL and applies it on behalf of the run (its owner and team): a new service, or a new
version of the owner's service of that name. The step stays ``submitted`` (shown ``running``) until a
replica of that version answers its readiness probe; it fails when the service cannot be applied, is
deleted meanwhile, or has no ready replica within ``timeout``. With ``autoscale.min: 0`` nothing runs
until a request comes, so the step is done once applied. Cancelling the run leaves the service as applied:
stopping a service that may already take traffic is a decision for its owner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainyard.auth.permissions import Caller, Role
from trainyard.errors import InvalidSpec, ServiceNotFound, TrainyardError
from trainyard.spec.pipeline_records import PipelineRunInfo, StepInfo, StepStatus
from trainyard.spec.serve import ServeStep, serve_field
from trainyard.spec.service import ServiceInfo, ServiceStatus

if TYPE_CHECKING:
    from trainyard.services.serving import ServingService

PLACEHOLDER = "pipeline://model"  # the model of a step not run yet: checked for everything but its URL


@dataclass(slots=True)
class Outcome:
    """Where a serve step stands: ``state`` None while it waits."""

    state: StepStatus | None
    reason: str


def is_serve_step(job: dict[str, Any]) -> bool:
    return "serve" in job


def queue_of(job: dict[str, Any]) -> str:
    """The queue the step's service's replicas wait in."""
    return ServeStep.model_validate(job["serve"]).queue


def run_caller(run: PipelineRunInfo) -> Caller:
    """The run as a caller: its owner, seeing what its team sees (a run without a team was an admin's)."""
    return Caller(user=run.owner or "local", admin=run.team is None,
                  teams={run.team: Role.MEMBER} if run.team else {}, source=f"pipeline {run.id}")


def check(serving: ServingService | None, job: dict[str, Any], from_step: bool,
          caller: Caller) -> list[tuple[str, str]]:
    """What would stop the step's service from being applied: (field within the step, message) pairs."""
    if serving is None:
        return [("serve", "this server runs no services")]
    step = ServeStep.model_validate(job["serve"])
    try:
        serving.check(step.service(PLACEHOLDER if from_step else step.model), caller)
    except InvalidSpec as e:
        return [("serve." + serve_field(str(err.get("field") or "")), str(err.get("message"))) for err in e.errors]
    except TrainyardError as e:
        field = str(e.details.get("field") or ("name" if "service" in e.details else ""))
        return [("serve." + serve_field(field) if field else "serve", e.message)]
    return []


def apply(serving: ServingService | None, run: PipelineRunInfo, s: StepInfo, model: str | None) -> tuple[ServiceInfo, dict]:
    """Apply the step's service over ``model`` (the upstream output's URL; None: the ref in the step).
    Its ``job`` as recorded: with ``applied: {service, version}``, what :func:`outcome` waits for."""
    if serving is None:
        raise TrainyardError("this server runs no services")
    step = ServeStep.model_validate(s.job["serve"])
    snapshot = run.workdirs.get(s.workdir) if step.module else None  # only a factory needs the step's code
    info = serving.apply(step.service(model or step.model), snapshot, run_caller(run), on_behalf=(run.owner, run.team))
    return info, {**s.job, "applied": {"service": info.id, "version": info.version}}


def progress(serving: ServingService | None, s: StepInfo, waited: float) -> Outcome:
    applied, serve = s.job.get("applied") or {}, s.job["serve"]
    if serving is None or not applied:
        return Outcome(StepStatus.FAILED, "this server runs no services")
    try:
        info = serving.get(applied["service"])
    except ServiceNotFound:
        return Outcome(StepStatus.FAILED, f"service {serve['name']} was deleted")
    return outcome(info, applied["version"], waited, float(serve["timeout"]))


def outcome(info: ServiceInfo, version: int, waited: float, timeout: float) -> Outcome:
    """Done once a replica of ``version`` (or a newer one) is ready; failed once stopped, or after ``timeout``."""
    if info.status != ServiceStatus.RUNNING:
        return Outcome(StepStatus.FAILED, f"service {info.name} is {info.status.value}: {info.reason}")
    auto = info.spec.service.autoscale
    if auto is not None and auto.min == 0 and info.wanted == 0:
        return Outcome(StepStatus.SUCCEEDED, f"service {info.name} version {version} applied, scaled to zero: "
                                             f"the first request to {info.url} starts a replica")
    ready = [r for r in info.replicas if r.ready and not r.draining and r.version >= version]
    if ready:
        return Outcome(StepStatus.SUCCEEDED, f"service {info.name} version {version} ready at {info.url} "
                                             f"({len(ready)} of {info.wanted} replicas)")
    if waited < timeout:
        return Outcome(None, f"service {info.name} version {version}: waiting for a ready replica")
    ended = [r for r in info.replicas if r.version >= version and r.status in ("failed", "cancelled")]
    why = f"; replica job {ended[-1].job_id} {ended[-1].status}: {ended[-1].reason}" if ended else ""
    return Outcome(StepStatus.FAILED, f"service {info.name} had no ready replica of version {version} within "
                                      f"{timeout:g}s ({info.reason or 'no reason given'}{why})")
