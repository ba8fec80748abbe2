"""A Ray node agent that dies while its launcher runs (the actor killed, its node still up): the launcher
stops the command and ends ``LostContact``, not ``Cancelled``, and a new agent attaching reads that.

No cluster: the agent runs in a plain child process, as in its Ray worker, and is SIGKILLed as Ray
kills an actor; the launcher is the real one.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import psutil

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    log_of, make_config, pid_alive, read_result, report_server,
)
from tests.support.waiting import until
from trainyard.engines.ray.actor import NodeAgent
from trainyard.launch.config import LaunchConfig
from trainyard.status import Reason

AGENT = """
import json, sys
from trainyard.engines.ray.actor import NodeAgent
NodeAgent().run("d-1-r0", json.loads(sys.argv[1]), sys.argv[2])
"""
SLEEPER = [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"]


def test_an_agent_that_dies_leaves_its_replica_lost_not_cancelled(tmp_path, report_server):
    workdir = tmp_path / "attempts" / "d-1" / "r0"
    config = make_config(tmp_path / "draft", report_server.url, SLEEPER, grace_period=0.5, exit_report_deadline=5)
    agent = subprocess.Popen([sys.executable, "-c", AGENT, json.dumps(config.to_dict()), str(workdir)])
    try:
        until(lambda: b"ready" in log_of(workdir), timeout=30)
        [launcher] = psutil.Process(agent.pid).children()
        command = launcher.children()[0].pid

        agent.send_signal(signal.SIGKILL)  # as ray.kill, or the actor's worker crashing
        agent.wait(10)
        until(lambda: not pid_alive(launcher.pid), timeout=30)
    finally:
        agent.kill()

    result = read_result(workdir)
    assert result["reason"] == Reason.LOST.value and result["exit_code"] == -15, result
    assert "started the launcher died" in result["message"]
    assert not pid_alive(command)  # the command went with it: nothing runs with nobody to follow it
    assert report_server.final()["result"] == result  # told the server itself, as any launcher does
    attached = NodeAgent().run("d-1-r0", None, str(workdir))  # the engine's new agent, attaching
    assert attached.reason == Reason.LOST
    assert LaunchConfig.read(workdir).command == SLEEPER
