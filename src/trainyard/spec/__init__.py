"""Specs: pydantic models, loaded from YAML with errors that name the field and line.

The names below load on first use: building the job models costs a few hundred
milliseconds, and a light submodule (``spec.units``, ``spec.roles``) or a CLI
command that never validates a spec should not pay for them.
"""

from __future__ import annotations

_LAZY = {
    "PRIORITY_CLASSES": "trainyard.spec.job",
    "Env": "trainyard.spec.job",
    "JobSpec": "trainyard.spec.job",
    "Resources": "trainyard.spec.job",
    "Retry": "trainyard.spec.job",
    "load_job": "trainyard.spec.loader",
    "parse_job": "trainyard.spec.loader",
    "parse_param_overrides": "trainyard.spec.loader",
}
__all__ = list(_LAZY)


def __getattr__(name: str):  # noqa: ANN202
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trainyard.spec' has no attribute {name!r}")
