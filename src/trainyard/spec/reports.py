"""What a launcher says about its replica: its result, and the reports it sends.

One schema for both ends: the server's report route takes :class:`LauncherReport`
as its body, and engines read ``result.json`` as a :class:`LaunchResult`. The
launcher itself writes the same shape as plain JSON (it stays free of pydantic
to start fast; see :mod:`trainyard.launch`), and a unit test checks that what it
writes parses here.

The body comes from a process the job can reach, so nothing in it is trusted:
integers are strict and bounded (a huge one would fail deep in the store, as a
500), and output paths must stay inside the job's outputs.
"""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from trainyard.artifact_paths import check_artifact_path
from trainyard.spec.nul import printable
from trainyard.status import Reason

log = logging.getLogger("trainyard.reports")

# strict: JSON true or "3" is no integer here; bounded by what the store's columns hold
Offset = Annotated[int, Field(strict=True, ge=0, le=2**63 - 1)]
ExitCode = Annotated[int, Field(strict=True, ge=-(2**31), le=2**31 - 1)]


def _known_reason(text: str) -> str:
    if Reason.of(text) is None:
        raise ValueError(f"is not a reason trainyard knows: {text!r}")
    return text


# kept as the text that was sent (``Error(exit N)`` carries the code); Reason.of gives its meaning
ReasonText = Annotated[str, Field(max_length=64), AfterValidator(_known_reason)]  # 64: the column's width


class _Wire(BaseModel):
    # unknown keys are ignored, as before: a newer launcher may send more than this server reads
    model_config = ConfigDict(extra="ignore")


class OutputRecord(_Wire):
    """One file the launcher uploaded, relative to the replica's output URL."""

    path: Annotated[str, AfterValidator(check_artifact_path)]
    size: Offset
    digest: str = Field(min_length=1, max_length=80, pattern=r"^[^\x00]+$")  # PostgreSQL's text holds no NUL


class LaunchResult(_Wire):
    """How a replica ended: ``result.json``, and the ``result`` of the launcher's last report."""

    exit_code: ExitCode | None = None  # None: the command never ran, or was never seen to exit
    reason: ReasonText | None = None   # None reads as LostContact
    message: Annotated[str, AfterValidator(printable)] | None = None  # the command's words: any bytes
    outputs: list[OutputRecord] = Field(default_factory=list)

    @field_validator("outputs", mode="before")
    @classmethod
    def _null_is_none(cls, v: object) -> object:
        return [] if v is None else v

    @property
    def kind(self) -> Reason:
        """What the reason means (see :data:`trainyard.status.CONSEQUENCES`)."""
        return Reason.of(self.reason) or Reason.LOST

    @classmethod
    def read(cls, text: str | bytes, where: object = "") -> LaunchResult | None:
        """A result file's contents, or None if it is not one (half-written, or not a launcher's)."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as e:
            log.warning("ignoring the result %s: %s", where, e.errors(include_url=False)[:3])
            return None


class LogPart(_Wire):
    offset: Offset  # of ``data``'s first byte in output.log
    data: str


class MetricsPart(_Wire):
    offset: Offset  # of the first line's first byte in metrics.jsonl
    lines: list[str]  # complete JSON lines


# a stack dump or a command's output: the bound keeps one report's body small (the launcher cuts to it)
MAX_ANSWER_TEXT = 256 * 1024
RequestId = Annotated[int, Field(strict=True, ge=1, le=2**63 - 1)]


class StackAnswer(_Wire):
    """A launcher's answer to one request for its command's stacks (``trainyard stack``)."""

    id: RequestId
    text: Annotated[str, Field(max_length=MAX_ANSWER_TEXT), AfterValidator(printable)] = ""
    error: Annotated[str, Field(max_length=2000), AfterValidator(printable)] | None = None


class ExecAnswer(_Wire):
    """A launcher's answer to a request to run a command beside its own (``trainyard exec``)."""

    id: RequestId
    exit_code: ExitCode | None = None  # None: it did not run, or ran past its timeout (``error`` says)
    output: Annotated[str, Field(max_length=MAX_ANSWER_TEXT), AfterValidator(printable)] = ""
    error: Annotated[str, Field(max_length=2000), AfterValidator(printable)] | None = None


class LauncherReport(_Wire):
    """One report (``POST /internal/attempts/{id}/replicas/{n}/report``); see :mod:`trainyard.launch.reporter`."""

    phase: Literal["running", "exited"] | None = None
    pid: int | None = None  # the command's (or the launcher's, when the command never started); not used
    log: LogPart | None = None
    metrics: MetricsPart | None = None
    result: LaunchResult | None = None  # with the last report only (phase "exited")
    stacks: list[StackAnswer] = Field(default_factory=list, max_length=8)  # answers to ReportAnswer.stacks
    execs: list[ExecAnswer] = Field(default_factory=list, max_length=8)  # and to ReportAnswer.execs

    @property
    def running(self) -> bool:
        """The command has started (its first such report starts the replica)."""
        return self.phase is not None

    @property
    def final(self) -> LaunchResult | None:
        """The replica's result: only a report of an exited command carries one."""
        return self.result if self.phase == "exited" else None


class StackAsk(BaseModel):
    """A request for the command's stacks, as a report's answer carries it (see :mod:`trainyard.launch.stacks`)."""

    id: int
    locals: bool = False
    native: bool = False


class ExecAsk(BaseModel):
    """A command to run beside the replica's own, as a report's answer carries it (:mod:`trainyard.launch.execs`)."""

    id: int
    argv: list[str]
    timeout: float


class ReportAnswer(BaseModel):
    cancel: bool  # stop the attempt, as SIGTERM would
    stacks: list[StackAsk] = Field(default_factory=list)  # answered in a later report's ``stacks``
    execs: list[ExecAsk] = Field(default_factory=list)  # and in its ``execs``
