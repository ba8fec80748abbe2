"""The job spec: one pydantic schema shared by the API, SDK, CLI and store."""

from __future__ import annotations

import re
import shutil
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from trainyard.spec.exec_size import exec_size_errors
from trainyard.spec.input_urls import InputUrl
from trainyard.spec.labels import MAX_LABELS, LabelKey, LabelValue
from trainyard.spec.names import NAME, check_name  # noqa: F401  (NAME: also imported from here)
from trainyard.spec.nul import refuse_nul
from trainyard.spec.params import check_finite, command_with, refs
from trainyard.spec.secret_refs import job_secrets
from trainyard.spec.submitted import STORED, EnvValue, ImageRef, OutputGlob, PipRequirement, gpu_type, submitting
from trainyard.spec.units import (INT32_MAX, Bytes, Cores, Count, Priority, Seconds, parse_cpu, parse_duration,
                                  parse_memory)

PRIORITY_CLASSES = {"low": 0, "normal": 100, "high": 200, "urgent": 300}

Scalar = Union[str, int, float, bool, None]
MAX_RETRIES = 1000
MAX_REPLICAS = 10_000  # a gang's replicas are rows and placements, planned every cycle
MAX_PROCS = 1024  # processes of one replica, on one node
MAX_GRACE = 3600.0  # seconds: a stopping attempt still runs and holds its room; a job needs minutes to checkpoint
ExitCode = Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX)]  # a C int, as a process's status is


def priority_text(v: int) -> str:
    """A priority as a person reads it: ``high (200)``, or the integer where no class has it."""
    name = next((k for k, n in PRIORITY_CLASSES.items() if n == v), None)
    return f"{name} ({v})" if name else str(v)


def parse_priority(v: Any) -> Any:
    """A named priority class as its integer; anything else is left for the int field to check."""
    if isinstance(v, str):
        if v not in PRIORITY_CLASSES:
            raise ValueError(f"unknown priority class {v!r}; use an integer or one of {', '.join(PRIORITY_CLASSES)}")
        return PRIORITY_CLASSES[v]
    return v


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        return refuse_nul(cls.__name__, data)


class Resources(Strict):
    cpu: Cores = Field(1.0, description="cores, e.g. 2, 0.5 or 500m")
    memory: Bytes | None = Field(None, description="bytes; write 512Mi, 4Gi… Enforced on the whole process tree.")
    gpu: Count = 0
    gpu_type: str | list[str] | None = Field(None, description="one type, or acceptable types in order of preference")
    node_selector: dict[str, str] = Field(default_factory=dict)

    @field_validator("cpu", mode="before")
    @classmethod
    def _cpu(cls, v: Any) -> float:
        return parse_cpu(v)

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, v: Any) -> int | None:
        return None if v is None else parse_memory(v)

    @field_validator("gpu_type")
    @classmethod
    def _gpu_type(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, list) and not v:
            raise ValueError("give at least one GPU type, or leave gpu_type out")
        for one in [v] if isinstance(v, str) else v or []:  # here, not per item: a list's error names no branch
            gpu_type(one, info)
        return v

    @property
    def gpu_types(self) -> list[str]:
        if self.gpu_type is None:
            return []
        return [self.gpu_type] if isinstance(self.gpu_type, str) else list(self.gpu_type)


class Env(Strict):
    pip: list[PipRequirement] = Field(default_factory=list, description="packages for a virtualenv cached by "
                                      "content hash: requirements, URLs, or paths in the work dir (./mypkg)")
    requirements: str | None = Field(None, description="a requirements file, relative to the spec file")


RetryOn = Literal["error", "oom", "lost_contact", "timeout"]


class Retry(Strict):
    max: int = Field(0, ge=0, le=MAX_RETRIES, description="retries after the first attempt")
    backoff: Seconds = Field(5.0, description="seconds before the first retry; doubles each time")
    on: list[RetryOn] = Field(default_factory=lambda: ["error", "oom", "lost_contact"])
    permanent_exit_codes: list[ExitCode] = Field(
        default_factory=lambda: [2, 126, 127],
        description="exit codes never retried: usage errors, not executable, command not found",
    )

    @field_validator("backoff", mode="before")
    @classmethod
    def _backoff(cls, v: Any) -> float:
        return 0.0 if v in (0, "0") else parse_duration(v)


MAX_AFTER = 64  # jobs one job may wait for
Condition = Literal["succeeded", "failed", "ended"]


class Dependency(Strict):
    """A job this one waits for, and how that job must end (Slurm's afterok, afternotok, afterany)."""

    job: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$", description="the job's id")
    # not ``on``: YAML 1.1 reads an unquoted ``on:`` key as true
    when: Condition = Field("succeeded", description="succeeded; failed (failed or cancelled); ended (any end)")

    @model_validator(mode="before")
    @classmethod
    def _short(cls, v: Any) -> Any:
        """``j-abc`` and ``j-abc:failed`` stand for ``{job: j-abc}`` and ``{job: j-abc, when: failed}``."""
        if isinstance(v, str):
            job, _, when = v.partition(":")
            return {"job": job, **({"when": when} if when else {})}
        return v

    def on_words(self) -> str:
        return {"succeeded": "succeeded", "failed": "failed (or was cancelled)", "ended": "ended"}[self.when]

    def met_by(self, status: str) -> bool | None:
        """Whether a job that is ``status`` lets this one start: True, False (never will), None (not yet)."""
        if status not in ("succeeded", "failed", "cancelled"):
            return None
        return self.when == "ended" or (status == "succeeded") == (self.when == "succeeded")


class JobSpec(Strict):
    name: str = "job"
    command: str | list[str]
    workdir: str | None = Field(None, description="folder snapshotted at submit time")
    env: Env | None = None
    image: ImageRef | None = Field(None, description="container image the command runs in (podman or docker on "
                                   "the node)")
    image_pull_policy: Literal["if-not-present", "always", "never"] = Field(
        "if-not-present", description="pull the image when missing (if-not-present), on every attempt (always), or never")
    image_fallback: Literal["refuse", "host", "fresh-venv"] = Field(
        "refuse", description="where no container runtime is: refuse the job at submit; run it on the host as a "
                              "job with no env would (PyTorchJob manifests); or on the host in a fresh, empty "
                              "virtualenv with pip (Kubeflow component steps)")
    worker_image: ImageRef | None = Field(
        None, description="image of replicas 1, 2, … where it differs from `image` (a PyTorchJob's Worker); "
                          "replica 0 runs in `image`")
    env_vars: dict[str, EnvValue] = Field(default_factory=dict, description="plain environment variables for the "
                                          "command")
    secrets: dict[str, str] = Field(default_factory=dict, description="environment variable -> the team's secret "
                                    "it holds (`trainyard secret set`); a list names secrets read under their names")
    params: dict[str, Any] = Field(default_factory=dict)
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=MAX_LABELS,
                                               description="key: value tags to list and filter jobs by "
                                                           "(trainyard ls --label key=value)")
    resources: Resources = Field(default_factory=Resources)
    inputs: dict[str, InputUrl] = Field(default_factory=dict)
    outputs: list[OutputGlob] = Field(default_factory=list, description="globs in the work dir uploaded besides "
                                      "TRAINYARD_OUTPUT_DIR")
    retry: Retry = Field(default_factory=Retry)
    timeout: Seconds | None = None
    grace_period: Seconds = Field(10.0, description=(
        "seconds a stopped job has after SIGTERM before its tree is killed; at most an hour (MAX_GRACE)"))
    priority: Priority = 100
    queue: str = "default"
    replicas: int = Field(1, ge=1, le=MAX_REPLICAS)
    procs_per_replica: int = Field(1, ge=1, le=MAX_PROCS)
    distributed: Literal["torch"] | None = None
    placement: Literal["pack", "spread"] = Field(
        "pack", description="pack: replicas best-fit onto as few nodes as possible; spread: one replica per node")
    preemptible: bool = Field(True, description="whether higher-priority work may stop this job (it is requeued)")
    after: list[Dependency] = Field(default_factory=list, max_length=MAX_AFTER, description="jobs that must end "
                                    "first, each as it says (default: succeeded); e.g. [j-abc, 'j-def:ended']")

    @field_validator("name", "queue")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v)  # type: ignore[return-value]

    @field_validator("command")
    @classmethod
    def _command(cls, v: Any) -> Any:
        if (isinstance(v, str) and not v.strip()) or (isinstance(v, list) and not v):
            raise ValueError("command must not be empty")
        return v

    @field_validator("worker_image")
    @classmethod
    def _worker_image(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and not info.data.get("image"):
            raise ValueError("a worker_image needs an image for replica 0 (the master)")
        return v

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
                raise ValueError(f"input name {name!r}: use letters, digits and '_'")
        return v

    @field_validator("env_vars", mode="before")
    @classmethod
    def _env_vars(cls, v: Any) -> Any:
        if isinstance(v, dict):
            for name in v:
                if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(name)):
                    raise ValueError(f"environment variable name {name!r}: use letters, digits and '_'")
            return {str(k): x for k, x in v.items()}  # each value is made text (or refused) by EnvValue
        return v

    @field_validator("secrets", mode="before")
    @classmethod
    def _secrets(cls, v: Any) -> Any:
        return job_secrets(v)

    @field_validator("params")
    @classmethod
    def _params(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_finite(v)

    @field_validator("timeout", "grace_period", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float | None:
        return None if v is None else parse_duration(v)

    @field_validator("grace_period")
    @classmethod
    def _bounded_grace(cls, v: float, info: ValidationInfo) -> float:
        # a stopping attempt holds its room, and runs on after its cancel, for this long: unbounded, a
        # cancelled job that ignores SIGTERM ran for days (a spec stored before the bound keeps its own)
        if submitting(info) and v > MAX_GRACE:
            raise ValueError(f"at most {MAX_GRACE:.0f} seconds (1h), not {v:.0f}")
        return v

    @field_validator("priority", mode="before")
    @classmethod
    def _priority(cls, v: Any) -> Any:
        return parse_priority(v)

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> "JobSpec":
        if self.replicas > 1 and self.distributed is None:
            raise ValueError("replicas > 1 needs distributed: torch")
        if len({d.job for d in self.after}) < len(self.after):
            raise ValueError("after: a job is named twice")
        if both := sorted(set(self.secrets) & set(self.env_vars)):
            raise ValueError(f"{', '.join(both)}: set by both env_vars and secrets")
        missing = sorted(set(self.param_refs()) - set(self.params))
        if missing:
            raise ValueError(f"command uses params not given: {', '.join(missing)}")
        if submitting(info) and (too_long := exec_size_errors(self.command, self.params, self.env_vars)):
            raise ValidationError.from_exception_data(type(self).__name__, too_long)
        return self

    def param_refs(self) -> list[str]:
        parts = [self.command] if isinstance(self.command, str) else self.command
        return [m for p in parts for m in refs(p)]

    def image_of(self, replica: int) -> str | None:
        """The image replica ``replica`` runs in (``worker_image`` for replicas 1, 2, … where given)."""
        return self.worker_image if replica > 0 and self.worker_image else self.image

    def argv(self) -> list[str]:
        """The command with ``{{params.x}}`` substituted; a string runs in a shell.

        A param is one word either way: shell-quoted in a string command, one
        element of a list command.
        """
        command = command_with(self.command, self.params)
        return [shutil.which("bash") or "/bin/sh", "-c", command] if isinstance(command, str) else command

    def with_params(self, overrides: dict[str, Any]) -> "JobSpec":
        data = self.model_dump()
        data["params"] = {**self.params, **overrides}
        # the rest was checked when this spec was (a stored schedule's job too): only the params are new
        return JobSpec.model_validate(data, context=STORED)

    def with_priority(self, priority: int | str) -> "JobSpec":
        """This spec at ``priority`` (a class name or an integer: ``rerun --priority``), refused naming the field."""
        from trainyard.errors import InvalidSpec
        from trainyard.spec.lines import validation_errors

        try:
            return JobSpec.model_validate({**self.model_dump(), "priority": priority}, context=STORED)
        except ValidationError as e:
            raise InvalidSpec(errors=validation_errors(e, {}, "priority")) from None
