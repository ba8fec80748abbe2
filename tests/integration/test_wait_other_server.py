"""A long poll held here for a job that another server sharing the database ends: answered soon after,
on a leader (which hears its own ends, not those written elsewhere) and on a leader that steps down
while the poll is held (the new leader writes the end)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.aio import run
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.services.platform import Platform
from trainyard.spec.job import JobSpec
from trainyard.spec.records import NodeInfo
from trainyard.store import Store

NODE = NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=0)
TIMEOUT = 30  # what each long poll asks for: the change must answer it long before


class HandedLease:
    """A lease the test hands over: this server leads from start() until lose()."""

    leader = False

    def start(self, on_gain, on_loss) -> None:  # noqa: ANN001
        self.leader, self._on_loss = True, on_loss
        on_gain()

    def lose(self) -> None:
        self.leader = False
        self._on_loss()

    def stop(self) -> None:
        self.leader = False


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'trainyard.db'}"


@pytest.fixture
def leader(tmp_path, db):
    """A leading server (its loops running) whose jobs never fit (no node has 8 CPUs): they stay pending."""
    lease = HandedLease()
    p = Platform(ServerSettings(home=tmp_path / "home", db=db), engine=FakeEngine([NODE]), lease=lease)
    p.start("http://127.0.0.1:9")
    yield p
    p.stop()


@pytest.fixture
def other(db):
    """Another server's store on the same database: what it writes is notified only there."""
    store = Store(db)
    yield store
    store.close()


def pending(platform: Platform) -> str:
    return platform.store.create_job(JobSpec.model_validate({"command": "x", "resources": {"cpu": 8}})).id


async def answer_after(platform: Platform, job_id: str, change) -> tuple[str, float]:  # noqa: ANN001
    """The long poll's answer when ``change`` (run in a thread once the poll waits) ends its job, and how
    many seconds after the change it came."""
    waiting = asyncio.create_task(platform.jobs.wait(job_id, TIMEOUT))
    await asyncio.sleep(0.3)
    await asyncio.to_thread(change)
    loop = asyncio.get_running_loop()
    changed = loop.time()
    answer = await waiting
    return json.loads(answer)["status"], loop.time() - changed


def test_the_leaders_long_poll_hears_a_cancel_another_server_wrote(leader, other):
    job_id = pending(leader)
    status, took = run(answer_after(leader, job_id, lambda: other.request_cancel(job_id)), TIMEOUT + 10)
    assert status == "cancelled" and took < TIMEOUT / 2


def test_a_long_poll_held_while_its_server_steps_down_hears_the_new_leaders_end(leader, other):
    job_id = pending(leader)

    def step_down_then_cancel_elsewhere() -> None:
        leader.lease.lose()  # the poll began on a leader, which hears its own ends only
        other.request_cancel(job_id)

    status, took = run(answer_after(leader, job_id, step_down_then_cancel_elsewhere), TIMEOUT + 10)
    assert status == "cancelled" and took < TIMEOUT / 2
