"""Specs sent as YAML text (the web UI's submit page): read with the same line-aware loader as
`trainyard run FILE`, so every error names the user's own line and field.

A route that takes either JSON or YAML reads its body here: FastAPI parses a declared body as JSON
only, so both kinds are read by hand and a JSON body's errors are raised as FastAPI's own.
"""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError

from trainyard.errors import InvalidSpec, TrainyardError
from trainyard.spec.lines import Path_, compose, error_entry, line_for

M = TypeVar("M", bound=BaseModel)
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
MAX_TEXT = 1 << 20  # a spec is a few KiB; a bigger body is not one
SOURCE = "spec.yaml"  # errors read "spec.yaml:4 resources.gpu: …", as the CLI's read "FILE:4 …"


class SpecCheck(BaseModel):
    """What a dry run found: the spec would be accepted as it is."""

    kind: str = Field(description="job or pipeline")
    name: str
    steps: int | None = Field(None, description="a pipeline's step instances (foreach items expanded)")
    warnings: list[str] = Field(default_factory=list)


def yaml_body(json_model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route that takes ``json_model`` as JSON or the spec as YAML text."""
    # the models it names (JobSpec…) are the document's components already, as the routes' responses name them
    schema = json_model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": schema},
        "application/yaml": {"schema": {"type": "string", "maxLength": MAX_TEXT,
                                        "description": "the spec as written in a file; errors name its lines"}}}}}


def is_yaml(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";")[0].strip().lower() in YAML_TYPES


async def read_text(request: Request) -> str:
    """The body as text, refused past :data:`MAX_TEXT` before it is all read."""
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_TEXT:
            raise InvalidSpec(errors=[error_entry(SOURCE, None, "", f"larger than {MAX_TEXT >> 20} MiB: not a spec")])
        parts.append(chunk)
    try:
        return b"".join(parts).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidSpec(errors=[error_entry(SOURCE, None, "", f"not UTF-8 text (byte {e.start})")]) from None


def read_yaml(text: str) -> tuple[Any, dict[Path_, int]]:
    """The data and the line of every key; not a mapping at the top is an error at line 1."""
    data, lines = compose(text, SOURCE)
    if not isinstance(data, dict):
        raise InvalidSpec(errors=[error_entry(SOURCE, 1, "", "expected a mapping of fields at the top level")])
    return data, lines


async def read_json(request: Request, model: type[M]) -> M:
    """The body as ``model``; its errors as FastAPI reports a declared body's."""
    try:
        return model.model_validate_json(await request.body())
    except ValidationError as e:
        raise RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in e.errors()]) from None


def with_lines(exc: TrainyardError, text: str) -> TrainyardError:
    """``exc`` with the line of each field it names, for errors found past the parse (queue, room, engine)."""
    try:
        _, lines = compose(text, SOURCE)
    except InvalidSpec:
        return exc

    def line(field: str) -> int | None:
        loc = tuple(int(p) if p.isdigit() else p for p in field.replace("[", ".").replace("]", "").split(".") if p)
        return line_for(loc, lines) if loc else None

    if isinstance(exc, InvalidSpec):
        for e in exc.errors:
            if e.get("line") is None and e.get("field"):
                e["line"] = line(e["field"])
                if e["line"]:
                    e["where"] = f"{SOURCE}:{e['line']} {e['field']}"
    elif isinstance(exc.details.get("field"), str) and "line" not in exc.details:
        exc.details["line"] = line(exc.details["field"])
    return exc
