"""What wakes the scheduler when a job ends through a launcher's report: the room it frees goes to a
job waiting for it, a retry is planned, and an end with nothing waiting costs no cycle. The loop's
once-a-second cycle is pushed an hour away (or the loop is not started), so only wake-ups admit here."""

import pytest
from fastapi.testclient import TestClient

from tests.support.waiting import until
from trainyard.api.app import create_app
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.sdk.client import Client
from trainyard.services.platform import Platform
from trainyard.spec.job import JobSpec
from trainyard.spec.records import NodeInfo
from trainyard.spec.reports import LauncherReport

pytestmark = pytest.mark.postgres

NODE = NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=1, gpu_type="A100", gpu_ids=["0"])
ONE_GPU = {"resources": {"gpu": 1}}
EXITED = LauncherReport(phase="exited", result={"exit_code": 0, "reason": "Succeeded", "outputs": []})


@pytest.fixture
def env(db_url, tmp_path):
    engine = FakeEngine([NODE])
    platform = Platform(ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret"), engine=engine)
    platform.loop.reconcile_every = 3600.0  # no timed cycle: each one below was woken
    with TestClient(create_app(platform, "http://testserver"), headers={"Authorization": "Bearer s3cret"}) as tc:
        yield tc, Client("http://testserver", token="s3cret", transport=tc._transport), engine, platform


def end(tc, engine, attempt_id, exit_code=0):
    result = {"exit_code": exit_code, "reason": "Succeeded" if exit_code == 0 else "Error", "outputs": []}
    r = tc.post(f"/internal/attempts/{attempt_id}/replicas/0/report", json={"phase": "exited", "pid": 1, "result": result},
                headers=engine.launcher_headers(attempt_id))
    assert r.status_code == 200, r.text


def launched(engine, n):
    return until(lambda: list(engine.launched)[n] if len(engine.launched) > n else None)


def test_the_room_a_job_frees_goes_at_once_to_the_job_waiting_for_it(env):
    # given a job on the only GPU and a second one waiting for it
    tc, sdk, engine, _ = env
    first = sdk.submit({"command": "x", **ONE_GPU})
    second = sdk.submit({"command": "x", **ONE_GPU})
    running = launched(engine, 0)
    until(lambda: second.refresh().reason)  # planned, and left waiting
    # when the first ends through its launcher's report
    end(tc, engine, running)
    # then the second is launched, woken by that end
    assert first.wait(timeout=5).status.value == "succeeded"
    launched(engine, 1)
    assert second.refresh().status.value == "starting"


def test_a_failed_attempt_that_is_retried_is_launched_again(env):
    tc, sdk, engine, _ = env
    job = sdk.submit({"command": "x", "retry": {"max": 1, "backoff": 0}, **ONE_GPU})
    end(tc, engine, launched(engine, 0), exit_code=1)
    assert launched(engine, 1).endswith("-2")
    end(tc, engine, launched(engine, 1))
    assert job.wait(timeout=5).status.value == "succeeded"


def test_an_end_wakes_the_loop_only_when_a_job_waits_for_its_room(db_url, tmp_path):
    # given a platform whose loop is not started: its cycles run here, one at a time
    engine = FakeEngine([NODE])
    platform = Platform(ServerSettings(home=tmp_path / "home", db=db_url), engine=engine)
    loop = platform.loop
    submit = lambda: platform.jobs.submit(JobSpec.model_validate({"command": "x", **ONE_GPU}))  # noqa: E731
    try:
        submit()
        loop.tick()
        first = launched(engine, 0)
        # when it ends with no job waiting, then the loop is not woken: a cycle would find nothing to do
        loop._wake.clear()
        platform.attempts.report(first, 0, EXITED, engine.launched[first][0].token)
        assert not loop._wake.is_set()
        # when one ends with a job left waiting for its GPU, then it is
        submit()
        loop.tick()
        second = launched(engine, 1)
        submit()
        loop.tick()  # plans the third, which waits
        loop._wake.clear()
        platform.attempts.report(second, 0, EXITED, engine.launched[second][0].token)
        assert loop._wake.is_set()
        loop.tick()
        launched(engine, 2)
    finally:
        platform.stop()


def test_a_gang_keeps_the_nodes_it_held_and_a_node_freed_elsewhere_goes_to_the_line(db_url, tmp_path):
    # given three 1-GPU nodes, each running a job whose timeout says it ends in 100, 200 and 300 s
    engine = FakeEngine([NODE.model_copy(update={"name": n}) for n in "abc"])
    platform = Platform(ServerSettings(home=tmp_path / "home", db=db_url), engine=engine)
    loop = platform.loop
    submit = lambda **kw: platform.jobs.submit(JobSpec.model_validate({"command": "x", **ONE_GPU, **kw}))  # noqa: E731
    node_of = lambda job: platform.store.get_job(job.id).attempts[0].node  # noqa: E731
    try:
        fill = [submit(timeout=t) for t in (100, 200, 300)]
        loop.tick()
        assert len(engine.launched) == 3
        # and a 2-node gang that waits: it holds the two nodes that drain first
        gang = submit(replicas=2, distributed="torch")
        loop.tick()
        assert platform.store.get_job(gang.id).reason.count("2 nodes held for it") == 1
        # when the third node's job ends early, and a job that would run past the gang's start arrives
        last = next(a for a in engine.launched if a.startswith(fill[2].id))
        platform.attempts.report(last, 0, EXITED, engine.launched[last][0].token)
        late = submit(timeout=3600)
        loop.tick()
        # then that job starts on the freed node: the gang kept the nodes it held instead of taking it
        assert len(engine.launched) == 4 and node_of(late) == node_of(fill[2])
        assert platform.store.get_job(gang.id).reason.count("2 nodes held for it") == 1
    finally:
        platform.stop()
