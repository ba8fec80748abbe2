"""The jobs listing's shared answers (services/job_pages.py): one read per page and store version."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.support.aio import run
from trainyard.services.job_pages import PageCache


def reader(texts: list[str], gate: threading.Event | None = None):
    """A read that returns the next of ``texts`` (after ``gate`` opens), counting its calls."""
    calls = []

    def read() -> str:
        if gate is not None:
            gate.wait(5)
        calls.append(1)
        return texts[len(calls) - 1]

    return read, calls


def test_callers_arriving_during_a_read_share_it_and_later_ones_get_its_text():
    async def main():
        pages, gate = PageCache(), threading.Event()
        read, calls = reader(["v1"], gate)
        waiting = [asyncio.create_task(pages.get("q", 7, read)) for _ in range(20)]
        await asyncio.sleep(0.05)
        gate.set()
        assert await asyncio.gather(*waiting) == ["v1"] * 20
        assert await pages.get("q", 7, read) == "v1"
        assert len(calls) == 1

    run(main())


def test_a_new_version_a_new_query_or_no_version_reads_again():
    async def main():
        pages = PageCache()
        read, calls = reader(["a", "b", "c", "d", "e"])
        assert [await pages.get("q", 1, read), await pages.get("q", 2, read), await pages.get("other", 2, read),
                await pages.get("q", None, read), await pages.get("q", None, read)] == ["a", "b", "c", "d", "e"]
        assert await pages.get("q", 2, read) == "b"  # still kept for version 2
        assert len(calls) == 5

    run(main())


def test_a_failed_read_is_not_kept():
    async def main():
        pages, fail = PageCache(), [True]

        def read() -> str:
            if fail.pop():
                raise RuntimeError("database gone")
            return "back"

        with pytest.raises(RuntimeError, match="database gone"):
            await pages.get("q", 3, read)
        fail.append(False)
        assert await pages.get("q", 3, read) == "back"

    run(main())


def test_a_caller_that_hangs_up_does_not_cancel_the_read_the_others_await():
    async def main():
        pages, gate = PageCache(), threading.Event()
        read, calls = reader(["shared"], gate)
        gone, stays = (asyncio.create_task(pages.get("q", 1, read)) for _ in range(2))
        await asyncio.sleep(0.05)
        gone.cancel()
        gate.set()
        assert await stays == "shared"
        assert gone.cancelled() and len(calls) == 1

    run(main())
