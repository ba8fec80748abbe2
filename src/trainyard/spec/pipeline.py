"""The pipeline spec: params and steps, read from YAML with errors that name the field and the line.

A pipeline file has ``params`` (overridable with ``-p``) and ``steps``, a mapping
from step name to step. A plain step is any job spec field plus the keys in
:class:`StepOptions` (``needs``, ``foreach``, ``cache``, ``inputs``, ``outputs``);
a notebook or component step is translated by :mod:`trainyard.pipelines.special`;
a ``serve`` step (:class:`trainyard.spec.serve.ServeStep`) applies a service once what it needs is done.
:func:`trainyard.spec.pipeline_graph.build` turns a spec into step instances, and
:func:`trainyard.spec.pipeline_file.load_pipeline` reads and checks a pipeline file.
"""

from __future__ import annotations

import re
from typing import Any, Union

from pydantic import BaseModel, ValidationError, field_validator

from trainyard.errors import InvalidSpec
from trainyard.spec.job import Strict
from trainyard.spec.lines import Path_, Written, error_entry, line_for, suggestion, validation_errors
from trainyard.spec.params import check_finite

STEP_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
IO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
OUTPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")  # a file or folder name; inputs also name env vars
STEP_KEYS = ("needs", "foreach", "cache", "inputs", "outputs")
SPECIAL_KEYS = ("notebook", "component")
SERVE_KEYS = ("serve", "needs", "workdir")  # all a serve step may have: it runs no command of its own
MAX_ITEMS = 10_000  # jobs one foreach step may fan out to: each is a row, a job and a folder
MAX_STEP_JOBS = 10_000  # jobs one run may make, all steps, items and component tasks together: a few KB of
                        # request would otherwise make millions of rows (30 steps × foreach 10,000; graphs W**8)
# characters of step specs (as JSON) one run may make, each foreach item counted: a few KB of request would
# otherwise make gigabytes (10,000 items of a 1 MB step; component tasks each translated to a 1 MB command)
MAX_RUN_TEXT = 64 << 20


class ValueInput(Strict):
    """``{value: "text"}``: the text is written to a file, whose path the step gets."""

    value: str

    @field_validator("value", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float, bool)) else v


class StepOptions(Strict):
    """What a step has besides its job: order, fan-out, caching and named artifacts."""

    needs: list[str] = []
    foreach: Union[int, list[Any], str, None] = None
    cache: bool = True
    inputs: dict[str, Union[str, ValueInput]] = {}
    outputs: list[str] = []

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not IO_NAME.match(name):
                raise ValueError(f"input name {name!r}: use letters, digits and '_'")
        return v

    @field_validator("outputs")
    @classmethod
    def _outputs(cls, v: list[str]) -> list[str]:
        for name in v:
            if not OUTPUT_NAME.match(name):
                raise ValueError(f"output name {name!r}: use letters, digits, '_' and '-' (it is a file or folder name)")
        if len(set(v)) != len(v):
            raise ValueError("an output is named twice")
        return v

    @field_validator("foreach")
    @classmethod
    def _foreach(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("give a number, a list, or \"{{params.NAME}}\"")
        if isinstance(v, list):
            check_finite({"foreach": v})
        return v


class PipelineSpec(Strict):
    name: str = "pipeline"
    params: dict[str, Any] = {}
    steps: dict[str, dict[str, Any]]

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not STEP_NAME.match(v):
            raise ValueError("use lower-case letters, digits and '-' (at most 63, starting with a letter or digit)")
        return v

    @field_validator("params")
    @classmethod
    def _params(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_finite(v)

    @field_validator("steps", mode="before")
    @classmethod
    def _steps(cls, v: Any) -> Any:
        if isinstance(v, dict):
            if not v:
                raise ValueError("a pipeline needs at least one step")
            for name, step in v.items():
                if not isinstance(name, str) or not STEP_NAME.match(name):
                    raise ValueError(f"step name {name!r}: use lower-case letters, digits and '-', "
                                     "starting with a letter or digit")
                if not isinstance(step, dict):
                    raise ValueError(f"step {name!r} must be a mapping of fields")
        return v


def merge_params(spec: PipelineSpec, overrides: dict[str, Any] | None, source: str,
                 written: Written | None = None) -> dict[str, Any]:
    """The pipeline's params with ``-p`` overrides; an override of an undeclared param is an error. ``written``:
    where the overrides were written (a schedule's ``params:``), which its errors name, with the line of each."""
    overrides = overrides or {}

    def entry(field: str, message: str) -> dict[str, Any]:
        if written is None:
            return error_entry(f"{source} (with -p overrides)", None, field, message)
        return error_entry(written.source, line_for(tuple(field.split(".", 1)), written.lines), field, message)

    unknown = sorted(set(overrides) - set(spec.params))
    if unknown:
        declared = ", ".join(spec.params) or "none"
        of = "" if written is None else f" of {source}"  # said by the where of a -p override's error
        raise InvalidSpec(errors=[entry(f"params.{k}", f"unknown param{of} (declared: {declared})"
                                        + suggestion(k, set(spec.params))) for k in unknown])
    try:
        check_finite(overrides)
    except ValueError as e:
        raise InvalidSpec(errors=[entry("params", str(e))]) from None
    return {**spec.params, **overrides}


def parse_pipeline(data: Any, source: str = "<pipeline>",
                   lines: dict[Path_, int] | None = None) -> PipelineSpec:
    if not isinstance(data, dict):
        raise InvalidSpec(errors=[error_entry(source, 1, "", "expected a mapping of fields at the top level")])
    try:
        return PipelineSpec.model_validate(data)
    except ValidationError as e:
        raise InvalidSpec(errors=validation_errors(e, lines or {}, source, PipelineSpec)) from None


def split_step(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(step options, the rest)``: the rest is a job spec (or a notebook/component step)."""
    return {k: raw[k] for k in STEP_KEYS if k in raw}, {k: v for k, v in raw.items() if k not in STEP_KEYS}


def is_special(raw: dict[str, Any]) -> bool:
    """A notebook or component step, which :mod:`trainyard.pipelines.special` turns into plain steps."""
    return isinstance(raw, dict) and any(k in raw for k in SPECIAL_KEYS)


def is_serve(raw: dict[str, Any]) -> bool:
    """A ``serve`` step: it applies a model-server service (:mod:`trainyard.spec.serve`) instead of running a job."""
    return isinstance(raw, dict) and "serve" in raw


class Errors:
    """Collects errors naming the field and, where the YAML is known, its line."""

    def __init__(self, source: str, lines: dict[Path_, int] | None) -> None:
        self.source = source
        self.lines = lines or {}
        self.items: list[dict[str, Any]] = []

    def add(self, loc: Path_, message: str) -> None:
        field = ".".join(str(p) for p in loc)
        if not any(e["field"] == field and e["message"] == message for e in self.items):
            self.items.append(error_entry(self.source, line_for(loc, self.lines), field, message))

    def add_validation(self, prefix: Path_, e: ValidationError, model: type[BaseModel] | None = None) -> None:
        sub = {k[len(prefix):]: v for k, v in self.lines.items() if k[:len(prefix)] == prefix}
        for item in validation_errors(e, sub, self.source, model):
            loc = prefix + tuple(p for p in item["field"].split(".") if p)
            line = item["line"] if item["line"] is not None else line_for(prefix, self.lines)
            field = ".".join(str(p) for p in loc)
            self.items.append(error_entry(self.source, line, field, item["message"]))

    def raise_if_any(self) -> None:
        if self.items:
            raise InvalidSpec(errors=self.items)
