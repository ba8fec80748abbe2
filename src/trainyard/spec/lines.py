"""YAML read with the line of every key and item, and errors that name the field and that line.

A leaf of :mod:`trainyard.spec`: the job loader, the Kubeflow converters and the
pipeline spec all report errors in one shape, ``{field, line, message, where}``.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, NamedTuple

import yaml
from pydantic import BaseModel, ValidationError

from trainyard.errors import InvalidSpec

Path_ = tuple[Any, ...]  # where in the data: the keys and list indexes from the top
MAX_VALUES = 100_000  # keys, items and scalars of one spec: far past any real one
TIMESTAMP = "tag:yaml.org,2002:timestamp"


def compose(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    """Plain Python data plus the 1-based line of every mapping key and item."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise InvalidSpec(errors=[error_entry(source, None, "", "not valid YAML: nested too deeply")]) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(e, "problem", None) or str(e)
        raise InvalidSpec(errors=[error_entry(source, line, "", f"not valid YAML: {problem}")]) from None
    lines: dict[Path_, int] = {}
    if node is None:
        return None, lines
    loader = yaml.SafeLoader("")
    left = [MAX_VALUES]

    def scalar(n: yaml.Node, path: Path_, what: str) -> Any:
        """A scalar as JSON holds it (a spec is stored as JSON): a date as the text written, since JSON has
        no dates; a list or mapping as a key, or ``!!binary`` bytes, an error at its line."""
        def refuse(message: str) -> InvalidSpec:
            field = ".".join(str(p) for p in path)
            return InvalidSpec(errors=[error_entry(source, n.start_mark.line + 1, field, message)])

        if not isinstance(n, yaml.ScalarNode):
            raise refuse(f"a {what} must be text or a number, not a list or mapping")
        if n.tag == TIMESTAMP:
            return n.value
        try:
            value = loader.construct_object(n, deep=True)
        except yaml.YAMLError as e:  # a tag the safe loader does not know (!foo)
            raise refuse(f"not valid YAML: {getattr(e, 'problem', None) or e}") from None
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise refuse(f"{n.tag.rsplit(':', 1)[-1]} is not a {what} a spec holds: write it as text")
        return value

    def walk(n: yaml.Node, path: Path_) -> Any:
        left[0] -= 1
        if left[0] < 0:  # aliases can make a short text expand without end ("billion laughs")
            raise InvalidSpec(errors=[error_entry(source, None, "", f"more than {MAX_VALUES} values: not a spec")])
        lines.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            out = {}
            for k, v in n.value:
                key = scalar(k, path, "key")
                if isinstance(key, bool) and k.style is None:  # `on:` (retry's), `yes:`: JSON keys are text, and
                    key = k.value  # YAML 1.1 would make them booleans no spec can hold; YAML 1.2 reads on/yes as text
                if key in out:  # YAML forbids it; PyYAML keeps the last, and what the first said was lost unseen
                    field = ".".join(str(p) for p in path + (key,))
                    raise InvalidSpec(errors=[error_entry(source, k.start_mark.line + 1, field,
                                                          f"given twice (first at line {lines[path + (key,)]})")])
                lines[path + (key,)] = k.start_mark.line + 1
                out[key] = walk(v, path + (key,))
            return out
        if isinstance(n, yaml.SequenceNode):
            return [walk(v, path + (i,)) for i, v in enumerate(n.value)]
        return scalar(n, path, "value")

    try:
        return walk(node, ()), lines
    except RecursionError:
        raise InvalidSpec(errors=[error_entry(source, None, "", "not valid YAML: nested too deeply")]) from None


class Written(NamedTuple):
    """Where values were written: the file, as errors name it, and the line of each key in it."""

    source: str
    lines: dict[Path_, int]


def error_entry(source: str, line: int | None, field: str, message: str) -> dict[str, Any]:
    """One error in the shape every spec error has: ``where`` reads ``source:line field``."""
    where = f"{source}:{line}" if line else source
    if field:
        where += f" {field}"
    return {"field": field, "line": line, "message": message, "where": where}


def line_for(loc: Path_, lines: dict[Path_, int]) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def placed(errors: list[dict[str, Any]], text: str, source: str) -> list[dict[str, Any]]:
    """Errors found in a spec once it was read (the server's: an unknown queue, a missing secret), each put at its
    field's line in ``text`` (the nearest key written above it) where it has no line; the others as they are."""
    try:
        _, lines = compose(text, source)
    except InvalidSpec:
        return errors
    out = []
    for err in errors:
        field = err.get("field") or ""
        loc = tuple(int(p) if p.isdigit() else p for p in field.split(".")) if field else ()
        line = next((lines[loc[:end]] for end in range(len(loc), 0, -1) if loc[:end] in lines), None)
        out.append({**err, **error_entry(source, line, field, err.get("message", ""))}
                   if line is not None and err.get("line") is None else err)
    return out


_UNION_TAGS = {"str", "int", "float", "bool", "none", "list", "dict"}


def field_loc(err: dict[str, Any], lines: dict[Path_, int]) -> Path_:
    """Where in the data an error is: its ``loc`` less the union branches pydantic adds ("str", "list[str]").

    A key of the data that happens to be spelled like a branch stays: the key an
    ``extra_forbidden`` or ``missing`` error names (``int: 1`` at the top level), or
    one the YAML has at that place.
    """
    raw, out = err["loc"], ()
    for i, p in enumerate(raw):
        tag = isinstance(p, str) and ("[" in p or p in _UNION_TAGS)
        named = i == len(raw) - 1 and err["type"] in ("extra_forbidden", "missing")
        if not tag or named or out + (p,) in lines:
            out += (p,)
    return out


def _inner(tp: Any, part: Any) -> list[Any]:
    """The types that ``part`` (a field name, list index or dict key) leads to inside ``tp``."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        f = tp.model_fields.get(part) if isinstance(part, str) else None
        return [f.annotation] if f else []
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return [t for a in (args[:1] if origin is typing.Annotated else args) for t in _inner(a, part)]
    if origin in (list, tuple, set) and isinstance(part, int):
        return list(args[:1])
    if origin is dict and len(args) == 2:
        return [args[1]]
    return []


def _models(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    if typing.get_origin(tp) in (typing.Union, types.UnionType, typing.Annotated):
        return [m for a in typing.get_args(tp) for m in _models(a)]
    return []


def suggestion(word: str, known: list[str] | set[str], cutoff: float = 0.7) -> str:
    """``"; did you mean 'x'?"`` for the known word closest to ``word`` (ignoring case), or "" when none is close."""
    folded = {k.lower(): k for k in sorted(known, reverse=True)}
    close = difflib.get_close_matches(word.lower(), list(folded), n=1, cutoff=cutoff)
    return f"; did you mean {folded[close[0]]!r}?" if close else ""


def known_fields(model: type[BaseModel], loc: Path_) -> set[str]:
    """The field names a mapping at ``loc`` inside ``model`` may have."""
    found: list[Any] = [model]
    for part in loc:
        found = [t for tp in found for t in _inner(tp, part)]
    return {name for tp in found for m in _models(tp) for name in m.model_fields}


def validation_errors(e: ValidationError, lines: dict[Path_, int], source: str,
                      model: type[BaseModel] | None = None) -> list[dict[str, Any]]:
    """One error entry per field; with ``model``, an unknown field names the closest known one."""
    out = []
    for err in e.errors():
        loc = field_loc(err, lines)
        field = ".".join(str(p) for p in loc)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown field {loc[-1]!r}"
            if model is not None and isinstance(loc[-1], str):
                msg += suggestion(loc[-1], known_fields(model, loc[:-1]))
        elif err["type"] == "missing":
            msg = "field required"
        out.append(error_entry(source, line_for(loc, lines), field, msg))
    # unions report one error per branch; keep the first for each field
    seen, uniq = set(), []
    for e2 in out:
        if e2["field"] not in seen:
            seen.add(e2["field"])
            uniq.append(e2)
    return uniq
