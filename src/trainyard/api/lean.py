"""Routes on a job's throughput path, read by hand: each parameter checked by a prebuilt pydantic
``TypeAdapter``, its errors raised as FastAPI's own (``RequestValidationError`` located
``path``/``query``/``header``; a JSON body goes through :func:`trainyard.api.spec_text.read_json`),
so a client sees the same 422 naming the same field.

Why: per request, FastAPI's dependency solving and parameter checks cost more CPU than the
report or the long poll they lead to (bench/RESULTS.md, session 9). A lean route declares
only ``request: Request``, which FastAPI resolves for nothing, and says what it takes in
``openapi_extra`` (:func:`documented`), so /openapi.json (and the fuzzing against it) is unchanged.
"""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, TypeAdapter, ValidationError


# as FastAPI documents a route with parameters (the component is the document's: every other route has it)
_INVALID = {"description": "Validation Error",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HTTPValidationError"}}}}


def checked(adapter: TypeAdapter, value: Any, where: str, name: str) -> Any:
    """``value`` (a path, query or header string) as ``adapter``'s type, or a 422 naming ``name``."""
    try:
        return adapter.validate_python(value)
    except ValidationError as e:
        raise RequestValidationError([{**err, "loc": (where, name, *err["loc"])} for err in e.errors()]) from None


def parameter(name: str, where: str, adapter: TypeAdapter, required: bool = True) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required, "schema": adapter.json_schema()}


def documented(parameters: list[dict[str, Any]], body_model: type[BaseModel] | None = None) -> dict[str, Any]:
    """``openapi_extra`` for a lean route: its parameters, and its JSON body's schema written out
    whole (no ``$ref``: a model that only a lean route takes is in no component of the document)."""
    extra: dict[str, Any] = {"parameters": parameters, "responses": {"422": _INVALID}}
    if body_model is not None:
        schema = body_model.model_json_schema()
        defs = schema.pop("$defs", {})
        extra["requestBody"] = {"required": True, "content": {"application/json": {"schema": _inlined(schema, defs)}}}
    return extra


def _inlined(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref", "")
        if ref.startswith("#/$defs/"):
            return _inlined(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inlined(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inlined(v, defs) for v in node]
    return node
