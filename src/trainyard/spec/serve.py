"""The built-in model server as a service: the spec ``trainyard serve`` applies, and the pipeline ``serve`` step.

:func:`serve_spec` is the one place that turns a model source into a service spec; the CLI
(through the SDK) and the pipeline runner both call it. A pipeline step
``{serve: {model: "{{steps.train.outputs.model}}", name: digits}}`` is read by
:class:`ServeStep` and becomes that same spec once the model's URL is known.
"""

from __future__ import annotations

import shlex
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from trainyard.errors import InvalidSpec
from trainyard.spec.job import Strict
from trainyard.spec.lines import validation_errors
from trainyard.spec.service import MAX_SERVICE_REPLICAS, Autoscale, ServiceSpec
from trainyard.spec.units import Seconds, parse_duration

MODEL_SERVER = "trainyard.serving.model_server"
DEFAULT_READY_TIMEOUT = 600.0  # a first replica may wait in its queue and pull its model: minutes, not seconds


def model_ref(source: str) -> str:
    """A model source as an input: a job id (``j-…``) or ``job://…``, an artifact id or digest
    (``a-…``, ``sha256:…``) or ``artifact://…``, or a URL as it is."""
    if "://" in source:
        return source
    if source.startswith("j-"):
        return f"job://{source}"
    return f"artifact://{source}"


def serve_spec(source: str, name: str, *, replicas: int | None = None, minimum: int | None = None,
               maximum: int | None = None, target_concurrency: float | None = None,
               scale_down_after: float | str | None = None, model_format: str = "auto", cpu: str | float = 1,
               memory: str | None = None, gpu: int = 0, queue: str = "default",
               python: str = "python", module: str | None = None) -> ServiceSpec:
    """A service running the built-in model server over ``source`` (see :func:`model_ref`); ``module``
    (``pkg.mod:Factory``) builds a PyTorch model from a state dict, imported from the code snapshot.
    ``target_concurrency`` and ``scale_down_after`` tune autoscaling (with ``minimum``/``maximum``) as in a
    service spec's ``autoscale``.
    Errors are :class:`InvalidSpec` naming the service spec's field (``name``, ``resources.cpu``)."""
    command = (f"exec {shlex.quote(python)} -m {MODEL_SERVER} --model \"$TRAINYARD_INPUT_MODEL\" "
               f"--name {shlex.quote(name)} --host \"$TRAINYARD_SERVICE_HOST\" --port {{{{port}}}} "
               f"--format {shlex.quote(model_format)}")
    if module:
        command += f" --module {shlex.quote(module)}"
    service: dict[str, Any] = {"readiness": {"path": "/v2/health/ready", "period": "1s"}}
    # any autoscale knob turns autoscaling on; with replicas as well, the spec's own check refuses both
    if any(v is not None for v in (minimum, maximum, target_concurrency, scale_down_after)):
        service["autoscale"] = {"min": 0 if minimum is None else minimum,
                                "max": maximum if maximum is not None else max(1, minimum or 1)}
        if target_concurrency is not None:
            service["autoscale"]["target_concurrency"] = target_concurrency
        if scale_down_after is not None:
            service["autoscale"]["scale_down_after"] = scale_down_after
        if replicas is not None:
            service["replicas"] = replicas
    else:
        service["replicas"] = 1 if replicas is None else replicas
    resources: dict[str, Any] = {"cpu": cpu, "gpu": gpu, **({"memory": memory} if memory else {})}
    data = {"name": name, "command": command, "inputs": {"model": model_ref(source)},
            "resources": resources, "queue": queue, "service": service,
            # the factory is imported from the code: snapshot the folder it is served from (the step's workdir)
            **({"workdir": "."} if module else {})}
    try:
        return ServiceSpec.model_validate(data)
    except ValidationError as e:
        raise InvalidSpec(errors=validation_errors(e, {}, "<service>", ServiceSpec)) from None


class ServeResources(Strict):
    cpu: float | str = 1.0
    memory: str | None = None
    gpu: int = Field(0, ge=0)


class ServeAutoscale(Autoscale):
    """A service spec's ``autoscale`` (the same fields, defaults and checks), but for ``max``: by default
    ``min``, or 1 with ``min: 0``."""

    max: int | None = Field(None, ge=1, le=MAX_SERVICE_REPLICAS)  # type: ignore[assignment]

    @model_validator(mode="after")
    def _check(self) -> "ServeAutoscale":
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is more than max ({self.max})")
        return self


class ServeStep(Strict):
    """A pipeline step's ``serve:`` block: apply a model-server service, done once a replica is ready."""

    model: str = Field(description="{{steps.S.outputs.O}}, a job id, an artifact id or digest, or a URL")
    name: str = Field(description="the service's name: /serve/NAME")
    format: Literal["auto", "sklearn", "xgboost", "torch-export", "torchscript", "torch-state-dict"] = "auto"
    module: str | None = Field(None, description="pkg.mod:Factory for a state dict, from the step's workdir")
    replicas: int | None = Field(None, ge=0, le=MAX_SERVICE_REPLICAS)
    autoscale: ServeAutoscale | None = None
    resources: ServeResources = Field(default_factory=ServeResources)
    queue: str = "default"
    timeout: Seconds = Field(DEFAULT_READY_TIMEOUT, description="how long the step waits for a ready replica")

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: Any) -> float:
        return parse_duration(v)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("name the model: \"{{steps.S.outputs.O}}\", a job id, an artifact id or a URL")
        return v.strip()

    @field_validator("autoscale")
    @classmethod
    def _one_way(cls, v: ServeAutoscale | None, info: ValidationInfo) -> ServeAutoscale | None:
        if v is not None and info.data.get("replicas") is not None:
            raise ValueError("give replicas or autoscale, not both")
        return v

    def service(self, model: str) -> ServiceSpec:
        """The service spec for the model at ``model``; errors name this block's fields (``name``, ``resources.cpu``)."""
        auto = self.autoscale
        try:
            return serve_spec(model, self.name, replicas=self.replicas, minimum=auto.min if auto else None,
                              maximum=auto.max if auto else None,
                              target_concurrency=auto.target_concurrency if auto else None,
                              scale_down_after=auto.scale_down_after if auto else None,
                              model_format=self.format, cpu=self.resources.cpu,
                              memory=self.resources.memory, gpu=self.resources.gpu, queue=self.queue,
                              module=self.module)
        except InvalidSpec as e:
            raise InvalidSpec(errors=[{**err, "field": serve_field(str(err.get("field") or ""))}
                                      for err in e.errors]) from None


def serve_field(field: str) -> str:
    """A service spec's field as the ``serve:`` block names it: ``inputs.model`` → ``model``,
    ``service.autoscale.max`` → ``autoscale.max``; the rest (``name``, ``resources.cpu``) as it is."""
    if field == "inputs.model" or field.startswith("inputs."):
        return "model"
    return field.removeprefix("service.")
