"""A Ray node agent's stop of a replica whose launcher cannot act: once the grace period and
``KILL_SLACK`` are past, the agent SIGKILLs the launcher and every process under it, and the
replica ends ``Cancelled``.

No cluster: the agent runs in this process, as in its Ray worker; the launcher and the command
are real processes. The command ignores SIGTERM and stops its own launcher (SIGSTOP), the one
way a job can keep the launcher from killing it after the grace period.
"""

from __future__ import annotations

import json
import sys
import threading

import psutil

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    log_of, make_config, pid_alive, report_server,
)
from tests.support.waiting import until
from trainyard.engines.ray.actor import KILL_SLACK, NodeAgent
from trainyard.status import Reason

DEFIANT = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited: neither this nor its child stops on SIGTERM
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
os.kill(os.getppid(), signal.SIGSTOP)  # its launcher: frozen, it can neither pass SIGTERM on nor kill
print("ready", flush=True)
time.sleep(600)
"""
GRACE = 0.5


def test_a_launcher_that_cannot_stop_its_command_is_killed_with_its_tree(tmp_path, report_server):
    workdir = tmp_path / "attempts" / "k-1" / "r0"
    config = make_config(tmp_path / "draft", report_server.url, [sys.executable, "-c", DEFIANT],
                         grace_period=GRACE, exit_report_deadline=5)
    agent, out, tree = NodeAgent(), {}, []
    runner = threading.Thread(target=lambda: out.update(r=agent.run("k-1-r0", config.to_dict(), str(workdir))))
    runner.start()
    try:
        until(lambda: b"ready" in log_of(workdir), timeout=30)
        launcher = next(p for p in psutil.Process().children() if str(workdir) in " ".join(p.cmdline()))
        tree += [launcher, *launcher.children(recursive=True)]
        assert len(tree) == 3
        # stopped once out of what it was doing when the signal came (a write: disk-sleep)
        until(lambda: launcher.status() == psutil.STATUS_STOPPED, timeout=10)

        assert agent.stop("k-1-r0") is True
        runner.join(GRACE + KILL_SLACK + 30)
        assert not runner.is_alive()
    finally:
        for p in tree:  # whatever a failed run left
            try:
                p.kill()
            except psutil.Error:
                pass

    result = out["r"]
    assert result.reason == Reason.CANCELLED and "killed" in result.message, result
    # the launcher, the command, and its child in a session of its own
    assert not [p for p in tree if pid_alive(p.pid)], [(p, p.status()) for p in tree if pid_alive(p.pid)]
    attached = NodeAgent().run("k-1-r0", None, str(workdir))  # an agent started afresh reads the same end
    assert attached.reason == Reason.CANCELLED


def test_a_launcher_that_stops_its_command_in_time_is_left_to_report_itself(tmp_path, report_server):
    command = [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"]
    workdir = tmp_path / "attempts" / "s-1" / "r0"
    config = make_config(tmp_path / "draft", report_server.url, command, grace_period=GRACE, exit_report_deadline=5)
    agent, out = NodeAgent(), {}
    runner = threading.Thread(target=lambda: out.update(r=agent.run("s-1-r0", config.to_dict(), str(workdir))))
    runner.start()
    until(lambda: b"ready" in log_of(workdir), timeout=30)

    assert agent.stop("s-1-r0") is True
    runner.join(30)
    assert not runner.is_alive()
    result = out["r"]
    assert result.reason == Reason.CANCELLED and "launcher got SIGTERM" in result.message, result
    assert json.loads((workdir / "result.json").read_text())["message"] == result.message
