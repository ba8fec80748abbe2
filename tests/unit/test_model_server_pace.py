"""The model server answers a small request on its event loop only while the model has shown itself quick.

Real threads and a real event loop: which thread ran the model is what is asserted, and a failure is
the same answer (400 naming the field, 500 with the model's reason) whichever thread ran it.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.aio import run
from trainyard.serving.model_server.app import Pace, Refused
from trainyard.serving.model_server.protocol import BadRequest


def where(seconds: float = 0.0):
    def model() -> str:
        if seconds:  # sleep(0) would yield the core: on a loaded machine a quick model measured as slow
            time.sleep(seconds)
        return threading.current_thread().name
    return model


def test_the_first_answer_goes_to_a_worker_thread_and_quick_small_ones_then_run_on_the_loop():
    async def go() -> list[bool]:
        pace, loop = Pace(), threading.current_thread().name
        return [await pace.run(100, where()) == loop for _ in range(3)]

    assert run(go()) == [False, True, True]


def test_a_big_body_always_goes_to_a_worker_thread():
    async def go() -> list[bool]:
        pace, loop = Pace(), threading.current_thread().name
        await pace.run(100, where())
        return [await pace.run(Pace.SMALL + 1, where()) == loop, await pace.run(Pace.SMALL, where()) == loop]

    assert run(go()) == [False, True]


def test_a_slow_answer_is_measured_and_sends_the_next_ones_to_the_thread():
    async def go() -> tuple[float, bool]:
        pace, loop = Pace(), threading.current_thread().name
        await pace.run(100, where())
        await pace.run(100, where(Pace.QUICK * 3))  # inline, and slow
        return pace.slowest, await pace.run(100, where()) == loop

    slowest, inline_after = run(go())
    assert slowest >= Pace.QUICK * 3 and not inline_after


def test_the_loop_takes_small_requests_again_once_quick_answers_have_outweighed_a_slow_one():
    async def go() -> int:
        pace, loop = Pace(), threading.current_thread().name
        pace.slowest = Pace.QUICK * 3  # as a slow answer leaves it
        for n in range(1, 500):
            if await pace.run(100, where()) == loop:
                return n
        return -1

    # 3 × QUICK × FORGET^55 < QUICK: not a request sooner (quick answers cannot lower it faster), and soon
    # after unless the machine stalled one of them past the decayed bound
    assert 56 <= run(go()) <= 120


@pytest.mark.parametrize("small", [True, False])
def test_failures_answer_the_same_on_the_loop_and_in_the_thread(small):
    def bad():
        raise BadRequest("inputs[0].shape: 3 values, expected 64")

    def broken():
        raise ValueError("X has 3 features")

    async def go() -> list[tuple[int, str]]:
        pace = Pace()
        await pace.run(100, where())  # quick: small ones now run inline
        size = 100 if small else Pace.SMALL + 1
        out = []
        for fn in (bad, broken):
            with pytest.raises(Refused) as e:
                await pace.run(size, fn)
            out.append((e.value.status, str(e.value)))
        return out

    assert run(go()) == [(400, "inputs[0].shape: 3 values, expected 64"),
                         (500, "the model failed on this input: ValueError: X has 3 features")]
