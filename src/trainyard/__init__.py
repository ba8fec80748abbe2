"""trainyard: say what a training job needs; trainyard finds room for it and runs it.

Importing ``trainyard`` costs next to nothing on purpose: the launcher imports
it on every attempt, and jobs import it for the in-job helpers. Everything is
loaded on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "Client": "trainyard.sdk.client",
    "Job": "trainyard.sdk.client",
    "JobSpec": "trainyard.spec",
    "log_metrics": "trainyard.sdk.injob",
    "params": "trainyard.sdk.injob",
    "output_dir": "trainyard.sdk.injob",
    "checkpoint_dir": "trainyard.sdk.injob",
    "checkpoint_saved": "trainyard.sdk.injob",
}
__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str):  # noqa: ANN202
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trainyard' has no attribute {name!r}")
