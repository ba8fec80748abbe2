"""The local engine with launchers that go on to the next attempt (trainyard.launch.handoff): what it
tells of, and sends to, an attempt whose launcher has left it."""

from __future__ import annotations

import time

import psutil

from tests.contract.rigs import EXIT_CODE, LocalRig
from tests.support.waiting import until
from trainyard.launch.handoff import LEFT_NAME


def _left(rig: LocalRig, attempt) -> bool:  # noqa: ANN001
    return (rig.engine.replica_dir(attempt.id, 0) / LEFT_NAME).exists()


def test_a_cancel_of_an_attempt_its_launcher_left_does_not_reach_the_attempt_it_runs_now(tmp_path):
    rig = LocalRig(tmp_path)
    try:
        # given an attempt that ended, its launcher kept and now running the next attempt
        first = rig.attempt("first")
        first, handle = rig.launch(first)
        pid = handle["replicas"][0]["pid"]
        rig.end(first)
        assert rig.wait_for(first, "exited").result.exit_code == EXIT_CODE
        until(lambda: _left(rig, first) and psutil.Process(pid).status() == psutil.STATUS_SLEEPING,
              timeout=rig.timeout)
        time.sleep(0.3)  # its word to the zygote that it is free, written right after the mark
        second, handle = rig.launch(rig.attempt("second"))
        assert handle["replicas"][0]["pid"] == pid
        until(lambda: rig.starts(second) == 1, timeout=rig.timeout)

        # when the first is cancelled again, and reconciled (a server restarted mid-way does both)
        rig.engine.cancel(first)
        seen = rig.observe(first)

        # then the first reads as over, not as alive with the launcher of the second
        assert seen.state == "exited" and seen.result.exit_code == EXIT_CODE
        # and the second went on running: it ends as its command says, not cancelled
        time.sleep(0.5)
        assert rig.observe(second).state == "alive"
        rig.end(second)
        assert rig.wait_for(second, "exited").result.exit_code == EXIT_CODE
    finally:
        rig.close()


def test_a_cancel_reaches_the_attempt_a_kept_launcher_runs(tmp_path):
    rig = LocalRig(tmp_path)
    try:
        first, handle = rig.launch(rig.attempt("first"))
        pid = handle["replicas"][0]["pid"]
        rig.end(first)
        rig.wait_for(first, "exited")
        until(lambda: _left(rig, first), timeout=rig.timeout)
        time.sleep(0.3)
        second, handle = rig.launch(rig.attempt("second"))
        assert handle["replicas"][0]["pid"] == pid
        until(lambda: rig.starts(second) == 1, timeout=rig.timeout)

        rig.engine.cancel(second)

        result = rig.wait_for(second, "exited").result
        assert result.reason == "Cancelled" and result.exit_code != EXIT_CODE
    finally:
        rig.close()
