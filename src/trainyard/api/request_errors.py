"""A request FastAPI refused before its route ran, said as what it is: a field of a spec (the body's ``spec``, or
the whole body of a route whose body parameter is called ``spec``), a field of a body that is not one (a token's,
a queue's: ``invalid request body: name: …``), or a query, path or header parameter, each named; a number out of
its range says the range (and that NaN or inf is none); a body that is not JSON, or not an object, says so."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

from trainyard.errors import InvalidSpec
from trainyard.spec.lines import field_loc
from trainyard.spec.number_words import BOUNDS, NUMBER_ERRORS, is_int, must_be

PARAMETERS = ("query", "path", "header")
NOT_OBJECT = {"model_type", "model_attributes_type", "dict_type"}


def invalid(request: Request, exc: RequestValidationError) -> InvalidSpec:
    """The error that ``exc`` is, one entry per field (unions report one error per branch: the first per field)."""
    errors: dict[tuple[str, str], dict[str, Any]] = {}
    for e in exc.errors():
        loc = tuple(e["loc"])
        place = loc[0] if loc and loc[0] in ("body", *PARAMETERS) else "body"
        loc = loc[1:] if loc and loc[0] in ("body", *PARAMETERS) else loc
        if place == "body" and (whole := _whole_body(loc, e)) is not None:  # not JSON, or not an object
            errors.setdefault((place, ""), {"field": "", "line": None, "where": "", "message": whole, "in": place})
            continue
        spec = place == "body" and (loc[:1] == ("spec",) or _body_name(request) == "spec")
        loc = field_loc({**e, "loc": loc[1:] if loc[:1] == ("spec",) else loc}, {})
        # list items as [i] (outputs[0].path), as the launcher's report errors always read
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" if i else str(p) for i, p in enumerate(loc))
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = f"unknown field {loc[-1]!r}"
        elif place in PARAMETERS and e["type"] in NUMBER_ERRORS:
            msg = _number(request, place, str(loc[0]) if loc else "", e)
        entry = {"field": field, "line": None, "where": field, "message": msg}
        errors.setdefault((place, field), entry if spec else {**entry, "in": place})
    return InvalidSpec(errors=list(errors.values()))


def _whole_body(loc: tuple[Any, ...], error: dict[str, Any]) -> str | None:
    """What is wrong with the body as a whole (not JSON, not an object, none), or None for an error in a field."""
    if error["type"] == "json_invalid":  # FastAPI's error is at the body's character; pydantic's at no field
        why = (error.get("ctx") or {}).get("error") or error["msg"].removeprefix("Invalid JSON: ")
        at = f" (at character {loc[0]})" if loc and isinstance(loc[0], int) else ""
        return f"not valid JSON: {why}{at}"
    if loc:
        return None
    if error["type"] == "missing":
        return "missing: send a JSON object"
    if error["type"] in NOT_OBJECT:
        return f"must be a JSON object, not {_json_kind(error.get('input'))}"
    return None


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    kinds = {list: "an array", str: "a string", int: "a number", float: "a number", type(None): "null"}
    return kinds.get(type(value), "that")


def _body_name(request: Request) -> str | None:
    """The name of the route's one body parameter: ``spec`` for a route whose whole body is a spec (a cluster's)."""
    route = request.scope.get("route")
    params = getattr(getattr(route, "dependant", None), "body_params", None) or []
    return params[0].name if len(params) == 1 else None


def _number(request: Request, place: str, name: str, error: dict[str, Any]) -> str:
    """``must be a finite number from 0 to 9007199254740992 (not 'NaN')``: the whole range the parameter takes,
    read from the route (the error itself holds only the bound it crossed)."""
    whole = error["type"].startswith("int")
    constraints = dict(error.get("ctx") or {})
    field = _parameter(request, place, name)
    if field is not None:
        info = field.field_info
        for item in info.metadata:
            constraints.update({k: getattr(item, k) for k in BOUNDS if getattr(item, k, None) is not None})
        whole = whole or is_int(info.annotation)
    given = error.get("input")
    return must_be(whole, constraints) + (f" (not {given[:40]!r})" if isinstance(given, str) else "")


def _parameter(request: Request, place: str, name: str) -> Any:
    """The route's (or one of its dependencies') ``place`` parameter called ``name``; None if not found."""
    route = request.scope.get("route")
    todo = [route.dependant] if getattr(route, "dependant", None) is not None else []
    while todo:
        dependant = todo.pop()
        for field in getattr(dependant, f"{place}_params"):
            if field.alias == name:
                return field
        todo.extend(dependant.dependencies)
    return None
