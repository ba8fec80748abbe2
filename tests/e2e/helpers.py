"""Small factories for end-to-end tests against a real server."""

from __future__ import annotations

import sys
from typing import Any

from tests.support.waiting import until

__all__ = ["PY", "py_job", "until"]

PY = sys.executable


def py_job(code: str, **spec: Any) -> dict[str, Any]:
    """A job spec that runs ``code`` with this interpreter."""
    return {"name": spec.pop("name", "t"), "command": [PY, "-c", code], **spec}
