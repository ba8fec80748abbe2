"""The local engine's batch launch: one attempt that cannot start does not stop the others."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import psutil

from tests.contract.rigs import EXIT_CODE, LocalRig
from tests.support.waiting import until
from trainyard.engines.ahead import AHEAD
from trainyard.engines.base import Launch
from trainyard.launch.config import CONFIG_NAME, LaunchConfig
from trainyard.launch.handle import HANDLE_NAME


def test_an_attempt_that_cannot_start_gets_its_error_and_the_others_start(tmp_path):
    rig = LocalRig(tmp_path)
    try:
        # given three attempts, the middle one's folder blocked by a file where its attempt dir goes
        attempts = [rig.attempt(f"batch{i}") for i in range(3)]
        blocked = rig.engine.replica_dir(attempts[1].id, 0).parent
        blocked.parent.mkdir(parents=True, exist_ok=True)
        blocked.write_text("not a folder")

        # when they are launched together
        found = rig.engine.launch_many([Launch(a, *rig.launch_args(a)) for a in attempts])
        rig.launched += [attempts[0], attempts[2]]

        # then the middle one's place holds its error, and the others run to their end
        assert isinstance(found[1], OSError)
        assert [found[0]["replicas"][0]["pid"] > 0, found[2]["replicas"][0]["pid"] > 0] == [True, True]
        for a in (attempts[0], attempts[2]):
            rig.end(a)
            assert rig.wait_for(a, "exited").result.exit_code == EXIT_CODE
        assert rig.observe(attempts[1]).state == "not_launched"
    finally:
        rig.close()


def test_a_launcher_gone_before_its_handle_is_written_was_launched_not_failed(tmp_path):
    rig = LocalRig(tmp_path)
    try:
        # given a command that ends at once, and a zygote that wrote no handle (it read no start time: no
        # /proc), whose launcher has exited (and been reaped) by the time the engine reads its start time
        attempt = rig.attempt("quick")
        args = rig.launch_args(attempt)
        # one whose launcher exits after it (an object store's options, set in its process, keep it from
        # taking another attempt: trainyard.launch.handoff)
        args[1][0].storage = {"s3": {"endpoint_url": "http://127.0.0.1:9"}}
        rig.end(attempt)
        fork = rig.engine._fork_launchers

        def fork_then_wait_for_exit(workdirs):
            forked = fork(workdirs)
            for pid, written in forked:
                assert written is not None  # here the zygote did write it; the test takes it away
                (Path(written["dir"]) / HANDLE_NAME).unlink()
                until(lambda: not psutil.pid_exists(pid), timeout=rig.timeout)
            return [(pid, None) for pid, _ in forked]

        rig.engine._fork_launchers = fork_then_wait_for_exit

        # when it is launched
        found = rig.engine.launch_many([Launch(attempt, *args)])
        rig.launched.append(attempt)

        # then it is a launch (with a handle), not a failed one, and its end is read from its result
        assert not isinstance(found[0], Exception)
        assert found[0]["replicas"][0]["create_time"] is None
        assert rig.wait_for(attempt, "exited").result.exit_code == EXIT_CODE
    finally:
        rig.close()


def test_an_attempts_folders_made_ahead_are_used_once_and_left_alone_when_in_the_way(tmp_path):
    rig = LocalRig(tmp_path)
    ahead = rig.engine.home / AHEAD
    try:
        # given a first attempt launched (the engine makes the next one's folders after it)
        first, second, third = (rig.attempt(f"ahead{i}") for i in range(3))
        assert not isinstance(rig.engine.launch_many([Launch(first, *rig.launch_args(first))])[0], Exception)
        rig.launched.append(first)
        ready = list(ahead.iterdir())
        assert len(ready) == 1

        # when the next one is launched
        found = rig.engine.launch_many([Launch(second, *rig.launch_args(second))])
        rig.launched.append(second)

        # then its folder is the one made ahead, private to its owner as a made one is, and another is made
        workdir = rig.engine.replica_dir(second.id, 0)
        assert not isinstance(found[0], Exception) and not ready[0].exists()
        assert stat.S_IMODE(workdir.stat().st_mode) == 0o700
        assert stat.S_IMODE((workdir / CONFIG_NAME).stat().st_mode) == 0o600
        assert LaunchConfig.read(workdir).attempt_id == second.id
        assert json.loads((workdir / "launcher.json").read_text())["pid"] == found[0]["replicas"][0]["pid"]
        ready = list(ahead.iterdir())
        assert len(ready) == 1

        # and given a third attempt whose folder is there already, holding something of its own
        kept = rig.engine.replica_dir(third.id, 0).parent / "kept.txt"
        kept.parent.mkdir(parents=True)
        kept.write_text("mine")

        # when it is launched, its folder is kept as it was and the one made ahead stays for the next
        found = rig.engine.launch_many([Launch(third, *rig.launch_args(third))])
        rig.launched.append(third)
        assert not isinstance(found[0], Exception) and kept.read_text() == "mine"
        assert stat.S_IMODE(rig.engine.replica_dir(third.id, 0).stat().st_mode) == 0o700
        for a in (first, second, third):
            rig.end(a)
            assert rig.wait_for(a, "exited").result.exit_code == EXIT_CODE
    finally:
        rig.close()
    # and a closed engine leaves no folder made ahead behind
    assert not list(ahead.iterdir())
