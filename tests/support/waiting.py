"""Polling until something is true, for tests of processes and servers."""

from __future__ import annotations

import time


def until(check, timeout: float = 30.0, every: float = 0.05, show=None):  # noqa: ANN001, ANN201
    """``check()``'s first truthy value; AssertionError after ``timeout`` seconds, saying what
    ``show()`` returns then (the state the check looked at) when it is given."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    seen = f"; at the end: {show()!r}" if show is not None else ""
    raise AssertionError(f"condition not met within {timeout}s{seen}")
