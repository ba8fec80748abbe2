"""A launcher killed outright (SIGKILL, the OOM killer) leaves its command running in a session of its own:
the local engine kills that command before it calls the replica lost, so the job's retry never runs beside it."""

from __future__ import annotations

import json
import os
import signal

import psutil

from tests.contract.rigs import LocalRig
from tests.support.waiting import until
from trainyard.launch.handle import HANDLE_NAME


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_replica_whose_launcher_was_killed_is_lost_only_once_its_command_is_gone(tmp_path):
    rig = LocalRig(tmp_path)
    try:
        # given a replica whose command runs (and would run until its flag file appears)
        attempt, _ = rig.launch(rig.attempt("orphan"))
        until(lambda: rig.starts(attempt) == 1, timeout=rig.timeout)
        workdir = rig.engine.replica_dir(attempt.id, 0)
        launcher = json.loads((workdir / HANDLE_NAME).read_text())["pid"]
        [command] = [p.pid for p in psutil.Process(launcher).children()]

        # when its launcher is killed with no chance to stop it
        os.kill(launcher, signal.SIGKILL)
        until(lambda: gone(launcher), timeout=rig.timeout)

        # then the engine calls it lost only once the command it left has been killed
        seen = until(lambda: (o := rig.observe(attempt)).state != "alive" and o, timeout=rig.timeout)
        assert seen.state == "lost" and gone(command)
    finally:
        rig.end(attempt)  # a command left running (as the engine did before) ends too
        rig.close()


def test_kill_ends_a_stopped_launcher_and_the_command_it_left(tmp_path):
    rig = LocalRig(tmp_path)
    launcher = None
    try:
        # given a replica whose launcher hangs (SIGSTOP) while its command runs on
        attempt, _ = rig.launch(rig.attempt("hung"))
        until(lambda: rig.starts(attempt) == 1, timeout=rig.timeout)
        launcher = json.loads((rig.engine.replica_dir(attempt.id, 0) / HANDLE_NAME).read_text())["pid"]
        [command] = [p.pid for p in psutil.Process(launcher).children()]
        os.kill(launcher, signal.SIGSTOP)

        # when the engine kills it
        assert until(lambda: rig.engine.kill(attempt, 0), timeout=rig.timeout)

        # then neither runs, and the replica reads lost
        assert gone(launcher) and gone(command)
        assert rig.observe(attempt).state == "lost"
    finally:
        if launcher is not None and not gone(launcher):
            os.kill(launcher, signal.SIGCONT)  # an engine that could not kill it leaves it to the cancel
        rig.end(attempt)
        rig.close()
