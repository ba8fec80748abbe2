"""Queues: a named line of jobs owned by a team, with a priority and quotas.

Written in YAML (the server's queue file, ``trainyard queue create -f``) or
built by the CLI and API; one schema for all of them. The planner works on
:class:`trainyard.scheduler.model.Queue`, built by :meth:`QueueSpec.model`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from trainyard.spec.job import Strict, check_name, parse_priority
from trainyard.spec.units import Bytes, Cores, Count, Priority, parse_cpu, parse_memory

ALL_GPU_TYPES = "*"


class Quota(Strict):
    """What a queue's running jobs may hold together; a field left out is unlimited."""

    cpu: Cores | None = Field(None, description="cores")
    memory: Bytes | None = Field(None, description="bytes; write 64Gi…")
    gpu: dict[str, Count] | None = Field(None, description="GPUs per type, e.g. {A100: 4}; '*' counts all types; an int means '*'")
    jobs: Count | None = Field(None, description="running jobs; never borrowed past")

    @field_validator("cpu", mode="before")
    @classmethod
    def _cpu(cls, v: Any) -> float | None:
        return None if v is None else parse_cpu(v)

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, v: Any) -> int | None:
        return None if v is None else parse_memory(v)

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("give a number of GPUs, or a number per GPU type")
        if isinstance(v, int):
            v = {ALL_GPU_TYPES: v}
        if isinstance(v, dict):
            for kind, n in v.items():
                if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                    raise ValueError(f"gpu.{kind}: must be a whole number ≥ 0, got {n!r}")
        return v


class QueueSpec(Strict):
    name: str
    team: str | None = Field(None, description="the team that owns it, for fair share; default: the queue's name")
    priority: Priority = Field(0, description="ties between jobs of equal priority go to the higher queue")
    max_priority: Priority | None = Field(None, description=(
        "the highest priority a non-admin's job on it may have (an admin's to set); default: normal (100)"))
    quota: Quota = Field(default_factory=Quota)
    borrowing: bool = Field(True, description="may use idle capacity beyond the quota (preempted first)")
    idle_gpus: Literal["flag", "cancel"] = Field(
        "flag", description="what happens to a job whose GPUs stay idle (server's idle_gpu_threshold and "
        "idle_gpu_period): flag it, or cancel it")

    @field_validator("name", "team")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return check_name(v)

    @field_validator("priority", "max_priority", mode="before")
    @classmethod
    def _priority(cls, v: Any) -> Any:
        return parse_priority(v)

    @model_validator(mode="after")
    def _team(self) -> "QueueSpec":
        if self.team is None:
            self.team = self.name
        return self


class QueueFile(Strict):
    queues: list[QueueSpec]

    @model_validator(mode="after")
    def _unique(self) -> "QueueFile":
        seen: set[str] = set()
        for q in self.queues:
            if q.name in seen:
                raise ValueError(f"queue {q.name!r} is defined twice")
            seen.add(q.name)
        return self


def load_queues(path: str | Path) -> list[QueueSpec]:
    """Read a queue file (``queues: [...]``, or a single queue); errors name the field and the line."""
    # the reading is the queue commands' alone: every API record imports these models
    from trainyard.errors import InvalidSpec
    from trainyard.spec.lines import compose, error_entry
    from trainyard.spec.loader import parse_model

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InvalidSpec(errors=[error_entry(str(path), None, "", f"cannot read: {e.strerror}")]) from None
    data, _ = compose(text, str(path))  # bad YAML is an error naming the file and line, not a traceback
    if isinstance(data, dict) and "queues" not in data:
        return [parse_model(QueueSpec, text, str(path))]
    return parse_model(QueueFile, text, str(path)).queues
