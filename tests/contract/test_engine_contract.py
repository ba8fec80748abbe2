"""The engine contract (``trainyard.engines.base.Engine``), checked the same way on every engine.

The fake runs nothing; the local engine runs launcher processes here; the Ray
engine runs them in actors on a real three-node Ray cluster on loopback: the
session's shared one (``shared_ray_cluster``; without Ray: skipped on a laptop,
a failure on CI), in a Ray namespace of each rig's own. Tests run grouped by
engine; the Ray ones run in the shared cluster's block, with its other users.
"""

from __future__ import annotations

import pytest

from tests.contract.rigs import EXIT_CODE, FakeRig, LocalRig, RayRig, Rig
from tests.support.waiting import until
from trainyard.engines.base import Launch
from trainyard.status import Reason

ENGINES = ["fake", "local", pytest.param("ray", marks=[pytest.mark.slow, pytest.mark.ray_cluster])]


@pytest.fixture(scope="module", params=ENGINES)
def place(request):
    """Where an engine runs: nothing, this machine, or the session's shared Ray cluster."""
    if request.param != "ray":
        return request.param, None
    return "ray", request.getfixturevalue("shared_ray_cluster")


@pytest.fixture
def rig(place, tmp_path):
    kind, cluster = place
    made: Rig = {"fake": FakeRig, "local": LocalRig}[kind](tmp_path) if cluster is None \
        else RayRig(tmp_path, cluster.address)
    yield made
    made.close()


def test_a_launched_attempt_is_alive_then_exited_with_its_result(rig):
    # given a launched attempt
    attempt, _ = rig.launch(rig.attempt("runs"))
    assert rig.observe(attempt).state == "alive"

    # when its command exits
    rig.end(attempt)

    # then reconcile reports the exit code and reason
    obs = rig.wait_for(attempt, "exited")
    assert (obs.attempt_id, obs.replica) == (attempt.id, 0)
    assert (obs.result.exit_code, obs.result.reason) == (EXIT_CODE, Reason.error(EXIT_CODE))


def test_launching_a_launched_attempt_again_is_a_no_op(rig):
    # given a launched attempt
    attempt, handle = rig.launch(rig.attempt("twice"))
    rig.wait_for(attempt, "alive")

    # when it is launched again, as a control plane that died before recording the handle does
    again = rig.engine.launch(attempt, *rig.launch_args(attempt))

    # then the same handle comes back and the command ran once
    assert again == handle
    rig.end(attempt)
    assert rig.wait_for(attempt, "exited").result.exit_code == EXIT_CODE
    assert rig.starts(attempt) == 1


def test_cancel_stops_the_attempt_and_a_second_cancel_changes_nothing(rig):
    # given a running attempt whose command would run for ever
    attempt, _ = rig.launch(rig.attempt("cancel"))
    rig.wait_for(attempt, "alive")

    # when it is cancelled twice
    rig.engine.cancel(attempt)
    rig.engine.cancel(attempt)

    # then it ends as cancelled, and cancelling what has ended does not raise
    assert rig.wait_for(attempt, "exited").result.reason == Reason.CANCELLED
    rig.engine.cancel(attempt)


def test_a_new_engine_over_the_same_place_follows_an_attempt_to_its_end(rig):
    # given an attempt whose command was running when the server restarted
    attempt, handle = rig.launch(rig.attempt("restart"))
    until(lambda: rig.starts(attempt), timeout=rig.timeout)

    # when a new engine object takes over
    rig.restart()

    # then it sees the attempt running, launching it again is a no-op, and it sees it end
    assert rig.observe(attempt).state == "alive"
    assert rig.engine.launch(attempt, *rig.launch_args(attempt)) == handle
    rig.end(attempt)
    assert rig.wait_for(attempt, "exited").result.exit_code == EXIT_CODE
    assert rig.starts(attempt) == 1


def test_a_restart_right_after_launch_loses_nothing_and_starts_nothing_twice(rig):
    # given an attempt launched a moment before the server restarted (its command may not have started)
    attempt, _ = rig.launch(rig.attempt("early"))

    # when a new engine object takes over, and launches again what it reports not_launched, as the platform does
    rig.restart()

    def ended():
        obs = rig.observe(attempt)
        if obs.state == "not_launched":
            rig.engine.launch(attempt, *rig.launch_args(attempt))
        if rig.starts(attempt):
            rig.end(attempt)
        return obs.state not in ("alive", "not_launched") and obs

    # then the command runs once, to its end
    obs = until(ended, timeout=rig.timeout)
    assert (obs.state, obs.result.exit_code, rig.starts(attempt)) == ("exited", EXIT_CODE, 1)


def test_an_attempt_never_launched_reads_as_not_launched(rig):
    # given an attempt this engine has never heard of
    attempt = rig.attempt("never")

    # when it is reconciled
    obs = rig.observe(attempt)

    # then it is not_launched, so the caller launches it
    assert (obs.attempt_id, obs.replica, obs.state) == (attempt.id, 0, "not_launched")


def test_cancelling_an_unknown_attempt_does_not_raise(rig):
    # given an attempt this engine has never heard of
    attempt = rig.attempt("unknown")

    # when it is cancelled
    rig.engine.cancel(attempt)

    # then nothing ran, and nothing will: it reads as never launched, or as cancelled before it ran
    obs = rig.observe(attempt)
    assert obs.state == "not_launched" or (obs.state, obs.result.reason) == ("exited", Reason.CANCELLED)
    assert rig.starts(attempt) == 0


def test_launch_many_starts_each_attempt_once_and_again_is_a_no_op(rig):
    # given three attempts handed over together, as the scheduler hands a cycle's admissions
    attempts = [rig.attempt(f"many{i}") for i in range(3)]
    launches = [Launch(a, *rig.launch_args(a)) for a in attempts]

    # when they are launched together, then again (a control plane that died before recording the handles)
    handles = rig.engine.launch_many(launches)
    rig.launched += attempts
    again = rig.engine.launch_many(launches)

    # then each got its own handle, the second call gave the same ones, and each command ran once to its end
    assert all(isinstance(h, dict) for h in handles) and again == handles
    assert len({str(h) for h in handles}) == 3
    for a in attempts:
        rig.end(a)
    assert [rig.wait_for(a, "exited").result.exit_code for a in attempts] == [EXIT_CODE] * 3
    assert [rig.starts(a) for a in attempts] == [1, 1, 1]
