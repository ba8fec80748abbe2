"""YAML in, validated spec out, with errors that name the field and the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from trainyard.errors import InvalidSpec
from trainyard.spec.job import JobSpec

M = TypeVar("M", bound=BaseModel)
Path_ = tuple[Any, ...]


def _compose(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    """Plain Python data plus the 1-based line of every mapping key and item."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(e, "problem", None) or str(e)
        raise InvalidSpec(errors=[_err(source, line, "", f"not valid YAML: {problem}")]) from None
    lines: dict[Path_, int] = {}
    if node is None:
        return None, lines
    loader = yaml.SafeLoader("")

    def walk(n: yaml.Node, path: Path_) -> Any:
        lines.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            out = {}
            for k, v in n.value:
                key = loader.construct_object(k, deep=True)
                lines[path + (key,)] = k.start_mark.line + 1
                out[key] = walk(v, path + (key,))
            return out
        if isinstance(n, yaml.SequenceNode):
            return [walk(v, path + (i,)) for i, v in enumerate(n.value)]
        return loader.construct_object(n, deep=True)

    return walk(node, ()), lines


def _err(source: str, line: int | None, field: str, message: str) -> dict[str, Any]:
    where = f"{source}:{line}" if line else source
    if field:
        where += f" {field}"
    return {"field": field, "line": line, "message": message, "where": where}


def _line_for(loc: Path_, lines: dict[Path_, int]) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


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


def validation_errors(e: ValidationError, lines: dict[Path_, int], source: str) -> list[dict[str, Any]]:
    out = []
    for err in e.errors():
        loc = field_loc(err, lines)
        field = ".".join(str(p) for p in loc)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown field {loc[-1]!r}"
        elif err["type"] == "missing":
            msg = "field required"
        out.append(_err(source, _line_for(loc, lines), field, msg))
    # unions report one error per branch; keep the first for each field
    seen, uniq = set(), []
    for e2 in out:
        if e2["field"] not in seen:
            seen.add(e2["field"])
            uniq.append(e2)
    return uniq


def parse_model(model: type[M], text: str, source: str = "<spec>") -> M:
    data, lines = _compose(text, source)
    if not isinstance(data, dict):
        raise InvalidSpec(errors=[_err(source, 1, "", "expected a mapping of fields at the top level")])
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise InvalidSpec(errors=validation_errors(e, lines, source)) from None


def parse_job(text: str, source: str = "<spec>") -> JobSpec:
    return parse_model(JobSpec, text, source)


def load_job(path: str | Path, overrides: dict[str, Any] | None = None) -> JobSpec:
    """Read a job spec file; ``overrides`` replace params (``-p key=value``)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InvalidSpec(errors=[_err(str(path), None, "", f"cannot read: {e.strerror}")]) from None
    from trainyard.spec import kubeflow  # here: it imports this module

    if kubeflow.is_pytorchjob_text(text):  # a Kubeflow PyTorchJob runs as the equivalent job
        spec = kubeflow.load_pytorchjob(text, str(path))
    else:
        spec = parse_job(text, str(path))
    if overrides:
        try:
            spec = spec.with_params(overrides)
        except ValidationError as e:
            raise InvalidSpec(errors=validation_errors(e, {}, f"{path} (with -p overrides)")) from None
    return spec


def parse_param_overrides(items: list[str]) -> dict[str, Any]:
    """``["lr=0.1", "name=x"]`` → ``{"lr": 0.1, "name": "x"}``; values read as YAML scalars."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InvalidSpec(errors=[_err("-p", None, "params", f"{item!r}: expected key=value")])
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            out[key.strip()] = raw
    return out
