"""Params given over a spec's own (``submit(params=)``, ``rerun(params=)``), and the warning of those it does not
declare."""

from __future__ import annotations

from typing import Any

from trainyard.spec.job import JobSpec


def with_params(spec: JobSpec, params: dict[str, Any] | None, source: str, *, quiet_if_none: bool = True) -> JobSpec:
    """``spec`` with ``params`` over its own, warning of those it does not declare (see warn_undeclared); where
    it declares none, only if not ``quiet_if_none`` (a job run again warns as `run FILE -p` does)."""
    if not params:
        return spec
    if spec.params or not quiet_if_none:
        warn_undeclared(source, params, spec.params)
    return spec.with_params(params)


def warn_undeclared(source: str, given: dict[str, Any], declared: dict[str, Any]) -> None:
    """Warn (not refuse: a script may read any param from trainyard.params()) of params the spec does not
    declare, which its command cannot use: a misspelt one would otherwise run the job with the default."""
    from trainyard.spec.loader import UndeclaredParamWarning, undeclared_params

    said = undeclared_params(source, given, declared)
    if said:
        import warnings

        warnings.warn(UndeclaredParamWarning(said), stacklevel=3)
