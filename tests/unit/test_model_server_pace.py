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


def test_a_slow_answer_sends_the_next_ones_to_the_thread_until_quick_ones_outweigh_it():
    async def go() -> tuple[bool, int]:
        pace, loop = Pace(), threading.current_thread().name
        await pace.run(100, where())
        await pace.run(100, where(Pace.QUICK * 3))  # inline, and slow
        after_slow = await pace.run(100, where()) == loop
        for n in range(1, 1000):
            if await pace.run(100, where()) == loop:
                return after_slow, n
        return after_slow, -1

    after_slow, back_after = run(go())
    assert not after_slow
    # 3 × QUICK forgotten by FORGET per answer: inline again once it has decayed below QUICK
    assert 40 <= back_after <= 80


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
