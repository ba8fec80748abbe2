"""Small factories for end-to-end tests against a real server."""

from __future__ import annotations

import sys
import time
from typing import Any

PY = sys.executable


def py_job(code: str, **spec: Any) -> dict[str, Any]:
    """A job spec that runs ``code`` with this interpreter."""
    return {"name": spec.pop("name", "t"), "command": [PY, "-c", code], **spec}


def until(check, timeout: float = 30.0, every: float = 0.05):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")
