"""Polling until something is true, for tests of processes and servers."""

from __future__ import annotations

import time


def until(check, timeout: float = 30.0, every: float = 0.05):  # noqa: ANN001, ANN201
    """``check()``'s first truthy value; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")
