"""A replica whose launcher stopped reporting (hung, or cut off from the server) is killed and ends
LostContact: nothing else would end it, not even its timeout, which its launcher enforces."""

from __future__ import annotations

import time

import pytest

from tests.integration.test_monitoring_api import launched, report
from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.spec.records import NodeInfo


@pytest.fixture
def env(tmp_path):
    with in_process(f"sqlite:///{tmp_path / 'trainyard.db'}", tmp_path / "home",
                    [NodeInfo(name="n", cpu=8, memory=16 * 2**30)]) as e:
        e.platform.loop.silent_for = 1.0
        yield e


def test_a_running_replica_silent_past_the_bound_is_killed_and_lost_and_one_still_setting_up_is_not(env):
    tc, sdk, engine = env.tc, env.sdk, env.engine
    # given a job whose launcher reported once, then fell silent, and one whose launcher is still setting up
    silent = sdk.submit({"name": "silent", "command": "train", "resources": {"cpu": 1}, "retry": {"max": 0}})
    report(tc, engine, launched(engine), phase="running", pid=1)
    setting_up = sdk.submit({"name": "setup", "command": "train", "resources": {"cpu": 1}})
    launched(engine, 2)
    # when the bound passes with no report
    ended = until(lambda: (j := sdk.get(silent.id)).status.is_terminal() and j, timeout=15)
    # then the silent one was killed and lost; the other still runs
    attempt = ended.attempts[0]
    assert (attempt.reason, ended.status.value) == ("LostContact", "failed")
    assert "sent no report for" in attempt.message and (attempt.id, 0) in engine.killed
    created = sdk.get(setting_up.id).attempts[0].created_at
    until(lambda: time.time() > created + 2 * env.platform.loop.silent_for + 1, timeout=15)  # reconciled since
    assert sdk.get(setting_up.id).status.value == "starting" and len(engine.killed) == 1


def test_a_starting_replica_is_lost_past_the_start_deadline_unless_its_launcher_reports_while_setting_up(env):
    tc, sdk, engine = env.tc, env.sdk, env.engine
    env.platform.loop.start_deadline = 2.0
    # given a job whose launcher never reached the server, and one that reports while it sets up (no phase)
    mute = sdk.submit({"name": "mute", "command": "train", "resources": {"cpu": 1}, "retry": {"max": 0}})
    mute_attempt = launched(engine)
    setting_up = sdk.submit({"name": "setup", "command": "train", "resources": {"cpu": 1}, "retry": {"max": 0}})
    busy = launched(engine, 2)
    created = sdk.get(setting_up.id).attempts[0].created_at
    # when the bound passes, and passes again, while the second one reports every half second
    while time.time() < created + 3 * env.platform.loop.start_deadline:
        report(tc, engine, busy, pid=1)
        time.sleep(0.5)
    # then the first was killed and lost, saying it never reached the server; the second still sets up
    ended = until(lambda: (j := sdk.get(mute.id)).status.is_terminal() and j, timeout=15)
    attempt = ended.attempts[0]
    assert (attempt.reason, ended.status.value) == ("LostContact", "failed")
    assert "never reached the server" in attempt.message and (mute_attempt, 0) in engine.killed
    assert sdk.get(setting_up.id).status.value == "starting" and (busy, 0) not in engine.killed


def test_a_replica_the_engine_has_not_placed_waits_saying_why_and_is_not_taken_for_a_silent_launcher(env):
    tc, sdk, engine = env.tc, env.sdk, env.engine
    env.platform.loop.start_deadline = 2.0
    # the running launcher below reports once: the fixture's 1 s of silence would have it killed by any cycle more
    # than a second after that report (seen on a loaded run), which is not what this test is about
    env.platform.loop.silent_for = 30.0
    why = "Ray has not placed the placement group trainyard-x for 10 s: Ray says NO_RESOURCES"
    # given a job whose attempt the engine cannot place (another user holds its node)
    job = sdk.submit({"name": "held", "command": "train", "resources": {"cpu": 1}, "retry": {"max": 0}})
    attempt = launched(engine)
    engine.hold(attempt, why)
    # when it waits well past the start deadline
    assert until(lambda: sdk.get(job.id).reason == why, timeout=10)
    time.sleep(3 * env.platform.loop.start_deadline)
    # then it is still starting, saying why, and nothing was killed
    held = sdk.get(job.id)
    assert (held.status.value, held.reason, engine.killed) == ("starting", why, [])
    # and once placed, its launcher starts and reports: running, with nothing more to say
    engine.place(attempt)
    report(tc, engine, attempt, phase="running", pid=1)
    until(lambda: sdk.get(job.id).status.value == "running", timeout=10)
    time.sleep(1.5)  # a cycle or more since
    assert sdk.get(job.id).reason is None and engine.killed == []


def test_a_replica_killed_for_its_silence_by_an_engine_that_can_only_cancel_it_ends_lost_and_is_retried(env):
    sdk, engine = env.sdk, env.engine
    engine.kill_by_cancel = True  # as Ray: its launcher, stopped, ends Cancelled
    env.platform.loop.start_deadline = 1.0
    # given a job whose launcher never reaches the server, retried once on lost contact
    job = sdk.submit({"name": "ray-mute", "command": "train", "resources": {"cpu": 1},
                      "retry": {"max": 1, "backoff": 0, "on": ["lost_contact"]}})
    first = launched(engine)
    # when the start deadline passes and the engine stops it
    again = until(lambda: len((j := sdk.get(job.id)).attempts) == 2 and j, timeout=15)
    # then its attempt ended LostContact, saying why, not Cancelled, and the job was retried
    attempt = again.attempts[0]
    assert (attempt.id, attempt.reason) == (first, "LostContact"), attempt
    assert "never reached the server" in attempt.message and first in engine.cancelled
