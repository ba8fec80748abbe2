"""trainyard: say what a training job needs; trainyard finds room for it and runs it.

Importing ``trainyard`` is cheap on purpose: jobs import it for the in-job
helpers, and the launcher imports it on every attempt. The client and spec
are loaded on first use.
"""

from __future__ import annotations

from typing import Any

from trainyard.sdk.injob import checkpoint_dir, log_metrics, output_dir, params

__version__ = "0.1.0"
__all__ = [
    "Client", "Job", "JobSpec", "log_metrics", "params", "output_dir", "checkpoint_dir", "__version__",
]


def __getattr__(name: str) -> Any:
    if name in ("Client", "Job"):
        from trainyard.sdk import client

        return getattr(client, name)
    if name == "JobSpec":
        from trainyard.spec import JobSpec

        return JobSpec
    raise AttributeError(f"module 'trainyard' has no attribute {name!r}")
