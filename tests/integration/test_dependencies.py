"""Jobs that wait for others (``after``) in-process (fake engine), on SQLite and PostgreSQL: out of the line
until released, each condition, a chain that fails cancelled link by link, refusals naming the field, and
another team's job as if it were not there."""

from __future__ import annotations

import pytest

from tests.integration.test_monitoring_api import scrape, series
from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.errors import InvalidSpec
from trainyard.sdk.client import Client
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]


@pytest.fixture
def env(db_url, tmp_path):
    with in_process(db_url, tmp_path / "home", NODES) as e:
        yield e.tc, e.sdk, e.engine


def attempt_of(sdk, job) -> str:
    return until(lambda: (a := sdk.get(job.id).attempts) and a[-1].id)


def job(name: str, *after: str) -> dict:
    return {"name": name, "command": "x", "after": list(after)}


def test_a_job_waits_out_of_line_until_its_dependency_succeeds(env):
    tc, sdk, engine = env
    first = sdk.submit(job("first"))
    running = attempt_of(sdk, first)
    second = sdk.submit(job("second", first.id))
    assert second.info.reason == f"waits for {first.id} (starting) to succeed"  # launched, not yet reported
    samples = scrape(tc)
    assert series(samples, "trainyard_pending_jobs", queue="default", reason="dependency").popitem()[1] == 1
    engine.finish(running, 0)
    assert first.wait(timeout=10).status.value == "succeeded"
    attempt_of(sdk, second)  # released, planned and launched
    assert second.refresh().status.value in ("starting", "running")


def test_each_condition_and_a_failed_chain_cancelled_link_by_link(env):
    _, sdk, engine = env
    a = sdk.submit({**job("a"), "retry": {"max": 0}})
    b = sdk.submit(job("b", a.id))                       # a must succeed
    c = sdk.submit(job("c", b.id))                       # b must succeed: it never will once b is cancelled
    on_fail = sdk.submit(job("on-fail", f"{a.id}:failed"))
    on_end = sdk.submit(job("on-end", f"{b.id}:ended"))
    engine.finish(attempt_of(sdk, a), 3)
    assert a.wait(timeout=10).status.value == "failed"
    assert b.wait(timeout=10).status.value == "cancelled"
    assert b.info.reason == f"never started: job {a.id} failed; this one was to start only once it succeeded"
    assert c.wait(timeout=10).status.value == "cancelled" and b.id in c.info.reason
    attempt_of(sdk, on_fail)  # a failed: its start
    attempt_of(sdk, on_end)  # b ended (cancelled): its start
    assert [e.actor for e in sdk.monitoring.events(b.id)][-1] == "system"


def test_a_dependency_that_is_not_there_or_can_never_be_met_is_refused_naming_the_field(env):
    _, sdk, engine = env
    done = sdk.submit(job("done"))
    engine.finish(attempt_of(sdk, done), 0)
    done.wait(timeout=10)
    for after, message in [(["j-nothere1"], "no such job: j-nothere1"),
                           ([done.id, f"{done.id}x"], f"no such job: {done.id}x"),
                           ([f"{done.id}:failed"], f"job {done.id} succeeded; this one was to start only once it "
                                                   "failed (or was cancelled), so it could never start")]:
        with pytest.raises(InvalidSpec) as e:
            sdk.submit(job("x", *after))
        assert [(err["field"], err["message"]) for err in e.value.errors] == [
            (f"after.{len(after) - 1}.job", message)]
    with pytest.raises(InvalidSpec, match="after.0.when"):
        sdk.submit(job("x", f"{done.id}:ok"))
    ready = sdk.submit(job("ready", done.id))
    assert ready.info.reason == "waiting for the scheduler"  # met already: straight into the line
    assert len(sdk.jobs().items) == 2  # nothing refused was stored


def test_another_teams_job_is_as_if_it_were_not_there(db_url, tmp_path):
    with in_process(db_url, tmp_path / "home", NODES, auth=True) as e:
        admin, users = e.sdk, {}
        for user, team in (("alice", "cv"), ("bob", "nlp")):
            admin.create_queue({"name": f"{team}-q", "team": team})
            secret = admin.identity.create_user(user, team=team, role="member").token.secret
            users[user] = Client("http://testserver", token=secret, transport=e.tc._transport)
        theirs = users["bob"].submit({**job("bobs"), "queue": "nlp-q"})
        with pytest.raises(InvalidSpec, match=f"no such job: {theirs.id}"):
            users["alice"].submit({**job("alices", theirs.id), "queue": "cv-q"})
        mine = users["alice"].submit({**job("mine"), "queue": "cv-q"})
        waits = users["alice"].submit({**job("next", mine.id), "queue": "cv-q"})
        assert waits.info.reason.startswith(f"waits for {mine.id}")
