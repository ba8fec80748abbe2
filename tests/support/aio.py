"""Running a test's coroutine to its end from synchronous test code."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Coroutine


def run(coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
    """``asyncio.run`` in a thread of its own: Playwright's sync API (the browser tests' session fixture)
    keeps a loop running in the main thread, where ``asyncio.run`` refuses to start another."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, asyncio.wait_for(coro, timeout)).result()
