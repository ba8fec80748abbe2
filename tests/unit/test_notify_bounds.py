"""How long a long poll's wait may sleep: unbounded where every change is heard (a leader), at most
``max_wait`` elsewhere, and a wait begun unbounded is woken when the bound is set."""

import asyncio

from tests.support.aio import run
from trainyard.services.notify import Notifier


def test_a_wait_begun_unbounded_is_woken_when_a_bound_is_set():
    n = Notifier()

    async def scenario():
        waiting = asyncio.create_task(n.wait("j-1", 0, 60))
        await asyncio.sleep(0.05)
        assert n.waited() == ["j-1"] and not waiting.done()
        await asyncio.to_thread(n.look_again_every, 0.5)  # from the lease's thread, as on a step-down
        return await asyncio.wait_for(waiting, 10)

    assert run(scenario()) == 1  # woken: it looks at the job again
    assert n.waited() == []


def test_a_bound_caps_each_wait_and_without_one_only_a_notify_wakes_it():
    n = Notifier()
    n.look_again_every(0.05)

    async def capped():
        return await asyncio.wait_for(n.wait("j-1", 0, 60), 10)

    assert run(capped()) == 0  # it slept at most the bound: nothing was notified

    async def unbounded():
        n.look_again_every(None)  # leading: every change is heard
        waiting = asyncio.create_task(n.wait("j-2", 0, 60))
        await asyncio.sleep(0.2)  # past the old bound
        assert not waiting.done()
        n.notify("j-2")
        return await asyncio.wait_for(waiting, 10)

    assert run(unbounded()) == 1 and n.max_wait is None
