"""YAML in, validated spec out, with errors that name the field and the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from trainyard.errors import InvalidSpec
from trainyard.spec import kubeflow
from trainyard.spec.job import JobSpec
from trainyard.spec.lines import compose, error_entry, validation_errors

M = TypeVar("M", bound=BaseModel)


def parse_model(model: type[M], text: str, source: str = "<spec>") -> M:
    data, lines = compose(text, source)
    if not isinstance(data, dict):
        hint = "" if source.endswith((".yaml", ".yml")) else (
            "; to run a script or a command, write `trainyard run script.py` or `trainyard run -- CMD …`")
        raise InvalidSpec(errors=[error_entry(source, 1, "", "expected a mapping of fields at the top level" + hint)])
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise InvalidSpec(errors=validation_errors(e, lines, source, model)) from None


def read_model(model: type[M], path: str | Path) -> M:
    """A spec file of ``model``; errors name the field and the line, or say the file cannot be read."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InvalidSpec(errors=[error_entry(str(path), None, "", f"cannot read: {e.strerror}")]) from None
    return parse_model(model, text, str(path))


def parse_job(text: str, source: str = "<spec>") -> JobSpec:
    return parse_model(JobSpec, text, source)


def parse_job_text(text: str, source: str) -> JobSpec:
    """A job spec as written in a file (or pasted in the web UI): ours, or a Kubeflow PyTorchJob."""
    if kubeflow.is_pytorchjob_text(text):  # a Kubeflow PyTorchJob runs as the equivalent job
        return kubeflow.load_pytorchjob(text, source)
    return parse_job(text, source)


class UndeclaredParamWarning(UserWarning):
    """A param given for a spec that does not declare it: its command cannot use it, only
    ``trainyard.params()`` in the job sees it (a misspelt ``lrr`` runs the job with the default ``lr``)."""


def undeclared_params(source: str, given: dict[str, Any] | list[str], declared: dict[str, Any]) -> str | None:
    """What to say of the params in ``given`` that ``source`` does not declare; None if it declares them all."""
    keys = sorted(set(given) - set(declared))
    if not keys:
        return None
    own = ", ".join(k for k in declared if k not in keys) or "none"
    one = len(keys) == 1
    return (f"{source} declares no param{'' if one else 's'} {', '.join(keys)} (its params: {own}), so its "
            f"command cannot use {'it' if one else 'them'}: the job sees {'it' if one else 'them'} only in "
            "trainyard.params()")


def load_job(path: str | Path, overrides: dict[str, Any] | None = None) -> JobSpec:
    """Read a job spec file; ``overrides`` replace params (``-p key=value``)."""
    spec, text = read_job(path)
    return with_overrides(spec, text, overrides, Path(path)) if overrides else spec


def read_job(path: str | Path) -> tuple[JobSpec, str]:
    """A job spec file as written (its own params, before any ``-p``), and its text."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InvalidSpec(errors=[error_entry(str(path), None, "", f"cannot read: {e.strerror}")]) from None
    try:
        return parse_job_text(text, str(path)), text
    except InvalidSpec as e:
        if any(err.get("field") in ("service", "kind") for err in e.errors):
            e.errors.append(error_entry(str(path), None, "service", "this is a service spec: start it with "
                                        f"`trainyard service apply {path}`"))
            raise InvalidSpec(errors=e.errors) from None
        raise


def with_overrides(spec: JobSpec, text: str, overrides: dict[str, Any], path: Path) -> JobSpec:
    """:func:`read_job`'s spec with ``-p`` overrides laid over its params (none on a Kubeflow manifest)."""
    if kubeflow.is_pytorchjob_text(text):
        raise InvalidSpec(errors=manifest_param_errors(overrides, str(path)))
    try:
        return spec.with_params(overrides)
    except ValidationError as e:
        raise InvalidSpec(errors=validation_errors(e, {}, f"{path} (with -p overrides)")) from None


def manifest_param_errors(overrides: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """A Kubeflow manifest declares no params and has nowhere to put one (Kubernetes substitutes nothing
    into ``args``), so a ``-p`` on it would change nothing the command sees: refused, as a pipeline
    refuses an undeclared param, rather than run the manifest as written without a word."""
    return [error_entry(f"{source} (with -p overrides)", None, f"params.{key}",
                        f"a Kubeflow {kubeflow.KIND} takes no params: its command runs with the container's "
                        "args as written; change them in the manifest (or run a trainyard job spec, which "
                        "declares params)") for key in sorted(overrides)]


def parse_param_overrides(items: list[str]) -> dict[str, Any]:
    """``["lr=0.1", "name=x"]`` → ``{"lr": 0.1, "name": "x"}``; values read as YAML scalars."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InvalidSpec(errors=[error_entry("-p", None, "params", f"{item!r}: expected key=value")])
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            out[key.strip()] = raw
    return out
