"""A log follow never sends a job's end ahead of the lines that came with it.

A launcher's last report carries its last lines and its end in one transaction. A follow that read "no
new lines" just before that transaction committed, and then saw the job ended, used to end the stream
there: the last lines were never sent (seen after a server restart, where the launcher's catch-up report
and the reconnecting follow meet; CI, session 14)."""

import json

import pytest

from tests.support.aio import run
from tests.support.waiting import until
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.services.jobs import LogEnd
from trainyard.services.platform import Platform
from trainyard.spec.job import JobSpec
from trainyard.spec.records import NodeInfo
from trainyard.spec.reports import LauncherReport

NODE = NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=0)


@pytest.fixture
def platform(tmp_path):
    engine = FakeEngine([NODE])
    p = Platform(ServerSettings(home=tmp_path / "home", db=f"sqlite:///{tmp_path / 'trainyard.db'}"), engine=engine)
    p.start("http://127.0.0.1:9")
    yield p, engine
    p.stop()


def test_lines_committed_with_the_end_just_after_an_empty_read_are_sent_before_the_end(platform):
    p, engine = platform
    job = p.jobs.submit(JobSpec.model_validate({"command": "x", "resources": {"cpu": 1}}), None)
    attempt_id = until(lambda: next(iter(engine.launched), None))
    token = engine.launcher_headers(attempt_id)["Authorization"].split()[1]
    p.attempts.report(attempt_id, 0, LauncherReport(phase="running", pid=1, log={"offset": 0, "data": "before\n"}),
                      token)
    last = LauncherReport(phase="exited", pid=1, log={"offset": 7, "data": "after\n"},
                          result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    real_read, reads = p.store.read_log_cursors, []

    def read_then_commit(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        found = real_read(*args, **kwargs)
        reads.append(found)
        if len(reads) == 2:  # the read that finds nothing new: the last report commits right after it
            assert found == []
            p.attempts.report(attempt_id, 0, last, token)
        return found

    p.store.read_log_cursors = read_then_commit

    async def follow() -> list:
        return [e async for e in p.jobs.follow(job.id, after=0, attempt=None, replica=None)]

    events = run(follow())
    assert p.store.get_job(job.id).status.value == "succeeded"
    assert [json.loads(e.chunk)["data"] for e in events[:-1]] == ["before\n", "after\n"]
    assert isinstance(events[-1], LogEnd) and events[-1].status.value == "succeeded"
