"""Cordons and drains in-process (fake engine, two GPU nodes), on SQLite and PostgreSQL: where work goes,
what a drain stops and how its job comes back, /metrics, and a cordon made through another server."""

from __future__ import annotations

import time

import pytest

from tests.integration.test_monitoring_api import launched, report, scrape, series
from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.services.cordons import TTL, Cordons
from trainyard.spec.records import NodeInfo
from trainyard.store import Store

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name=n, cpu=8, memory=16 * 2**30, gpu=2, gpu_type="A100", gpu_ids=["0", "1"]) for n in "ab"]


@pytest.fixture
def env(db_url, tmp_path):
    with in_process(db_url, tmp_path / "home", NODES) as e:
        # no timed reconcile: the fake engine reports a cancelled attempt as ended at its next one, and the
        # drain test sends that end itself, after it looked at the stopping attempt (a reconcile between the
        # two, once a second, ended it first: a full run failed so in sessions 30 and 31)
        e.platform.loop.reconcile_every = 3600.0
        yield e.tc, e.sdk, e.engine


def gpu_job(name: str) -> dict:
    return {"name": name, "command": "train", "resources": {"gpu": 2}}


def node_of(sdk, job_id: str, attempt: int = 0) -> str | None:
    attempts = sdk.get(job_id).attempts
    return attempts[attempt].node if len(attempts) > attempt else None


def test_a_cordoned_node_takes_nothing_and_a_drain_requeues_its_work_without_charging_a_retry(env):
    tc, sdk, engine = env
    sdk.cordon("a", reason="bios update")
    first = sdk.submit({**gpu_job("first"), "retry": {"max": 0}})
    assert until(lambda: node_of(sdk, first.id)) == "b"
    second = sdk.submit(gpu_job("second"))  # b is full and a cordoned: it waits, naming a
    why = until(lambda: (sdk.get(second.id).reason or "").replace("waiting for the scheduler", ""))
    assert "cordoned" not in why, why  # b could hold it once free: it waits for room, not for an admin
    samples = scrape(tc)
    assert series(samples, "trainyard_node_unschedulable", node="a").popitem()[1] == 1
    assert series(samples, "trainyard_node_unschedulable", node="b").popitem()[1] == 0
    attempt = sdk.get(first.id).attempts[0].id
    report(tc, engine, attempt, phase="running", pid=1)

    drained = sdk.drain("b", reason="fan failure")
    assert drained.stopped == [attempt] and attempt in engine.cancelled
    assert sdk.node("b").cordon.drained_at and sdk.node("b").attempts == 1  # stopping, not gone yet
    report(tc, engine, attempt, phase="exited", pid=1, result={"exit_code": -15, "reason": "Cancelled", "outputs": []})
    job = sdk.get(first.id)
    assert job.status.value == "pending" and (job.attempts[0].reason, job.attempts[0].status.value) == (
        "NodeDrained", "cancelled")
    assert until(lambda: "waits for cordoned nodes a, b" in (sdk.get(first.id).reason or "") or None)
    assert sdk.node("b").attempts == 0

    sdk.uncordon("a")  # retry max 0 and yet it comes back: a drain is not the job's failure
    assert until(lambda: node_of(sdk, first.id, 1)) == "a"
    assert sdk.get(second.id).status.value == "pending"
    audited = [e.action for e in sdk.identity.audit()]
    assert audited.count("node.cordon") == 1 and {"node.drain", "node.uncordon"} <= set(audited)


def test_cordoning_again_keeps_when_and_takes_the_new_reason(env):
    _, sdk, _ = env
    first = sdk.cordon("a", reason="one")
    time.sleep(0.01)
    again = sdk.cordon("a")
    assert (again.cordon.reason, again.cordon.at) == ("one", first.cordon.at)
    assert sdk.cordon("a", reason="two").cordon.reason == "two"
    assert sdk.uncordon("a").cordon is None and sdk.uncordon("a").cordon is None  # twice: no error


def test_a_cordon_made_through_another_server_is_seen_within_its_ttl(db_url):
    one, two = Cordons(Store(db_url)), Cordons(Store(db_url))
    assert one.current() == {} and two.current() == {}
    two.rows.cordon("gpu-3", "rack move", "admin")
    assert one.current() == {}  # read less than TTL ago
    time.sleep(TTL + 0.05)
    assert one.current()["gpu-3"].reason == "rack move"


def test_a_drained_attempt_is_no_try_of_the_job_it_retries_as_its_first_failure(env):
    tc, sdk, engine = env
    job = sdk.submit({**gpu_job("drained"), "retry": {"max": 1, "backoff": "1s"}})
    first = launched(engine)
    report(tc, engine, first, phase="running", pid=1)
    sdk.drain(sdk.get(job.id).attempts[0].node, reason="firmware")
    report(tc, engine, first, phase="exited", pid=1, result={"exit_code": -15, "reason": "Cancelled", "outputs": []})
    second = launched(engine, 2)  # on the other node
    report(tc, engine, second, phase="running", pid=1)
    report(tc, engine, second, phase="exited", pid=1,
           result={"exit_code": 1, "reason": "Error(exit 1)", "outputs": []})
    ended = sdk.get(job.id)  # one failure of max 1: retried, at the first backoff, not failed "after 2 attempts"
    assert ended.status.value == "pending", ended.reason
    assert ended.not_before - ended.attempts[1].ended_at == pytest.approx(1.0, abs=0.5)
