"""trainyard: say what a training job needs; trainyard finds room for it and runs it.

Importing ``trainyard`` costs next to nothing on purpose: the launcher imports
it on every attempt, and jobs import it for the in-job helpers. Everything is
loaded on first use.
"""

from __future__ import annotations

import sys

__version__ = "0.1.0"


def _httpx_cli_on_call() -> None:
    """Keep ``import httpx`` from importing httpx's own command-line client.

    httpx 0.28 imports ``httpx._main`` (click, rich's progress and syntax, pygments) whenever those
    are installed, as they are beside typer: about half of httpx's import time, paid by the CLI,
    the SDK and the server on every start (encode/httpx#3547). A stand-in takes its place and
    loads the real one if ``httpx.main`` is ever called.
    """
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    stand_in = type(sys)("httpx._main")

    def main(*args, **kwargs):  # noqa: ANN202
        import importlib

        del sys.modules["httpx._main"]
        return importlib.import_module("httpx._main").main(*args, **kwargs)

    stand_in.main = main
    sys.modules["httpx._main"] = stand_in


_httpx_cli_on_call()

_LAZY = {
    "Client": "trainyard.sdk.client",
    "Job": "trainyard.sdk.job",
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
