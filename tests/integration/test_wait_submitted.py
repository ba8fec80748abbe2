"""The long poll for a job this server just submitted (the SDK sends it right after its submit, while
the scheduler admits the job): answered without reading the job until something about it is heard,
and read as before wherever it may have changed unheard here."""

import asyncio
import json

import pytest

from tests.support.aio import run
from tests.support.waiting import until
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.services.platform import Platform
from trainyard.spec.job import JobSpec
from trainyard.spec.records import NodeInfo
from trainyard.spec.reports import LauncherReport

NODE = NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=1, gpu_type="A100", gpu_ids=["0"])
EXITED = LauncherReport(phase="exited", result={"exit_code": 0, "reason": "Succeeded", "outputs": []})


@pytest.fixture
def platform(tmp_path):
    """A platform whose loop is not started (its cycles run here) and that hears its own notifies, as a leader."""
    engine = FakeEngine([NODE])
    p = Platform(ServerSettings(home=tmp_path / "home", db=f"sqlite:///{tmp_path / 'trainyard.db'}"), engine=engine)
    yield p
    p.stop()


@pytest.fixture
def reads(platform, monkeypatch):
    """The job ids the long polls read the state of."""
    calls, real = [], platform.store.job_state
    monkeypatch.setattr(platform.store, "job_state", lambda job_id: calls.append(job_id) or real(job_id))
    return calls


def submit(platform):
    return platform.jobs.submit(JobSpec.model_validate({"command": "x"}))


def test_the_wait_for_a_job_submitted_here_reads_nothing_before_its_end(platform, reads):
    job = submit(platform)

    async def scenario():
        waiting = asyncio.create_task(platform.jobs.wait(job.id, 30))
        await asyncio.sleep(0.05)  # it waits for the job's end
        platform.loop.tick()
        attempt = until(lambda: next(iter(platform.engine.launched), None))
        platform.attempts.report(attempt, 0, EXITED, platform.engine.launched[attempt][0].token)
        return await asyncio.wait_for(waiting, 10)

    assert json.loads(run(scenario()))["status"] == "succeeded"
    assert reads == []


def test_a_job_submitted_before_this_server_led_is_read(platform, reads):
    # given a job submitted here, then cancelled by another server (unheard here) before this one leads
    job = submit(platform)
    platform.store.request_cancel(job.id)
    platform.jobs.leading()
    # when its wait comes, then it reads the job and answers its end at once
    answer = run(platform.jobs.wait(job.id, 30), 10)
    assert json.loads(answer)["status"] == "cancelled" and reads == [job.id]


def test_a_server_that_does_not_schedule_reads_what_it_submitted(platform, reads):
    job = submit(platform)
    platform.store.request_cancel(job.id)  # by the leader: a follower hears nothing of it
    platform.notifier.max_wait = 60.0  # a follower (whose long polls look again at most this often)
    answer = run(platform.jobs.wait(job.id, 30), 10)
    assert json.loads(answer)["status"] == "cancelled" and reads == [job.id]
