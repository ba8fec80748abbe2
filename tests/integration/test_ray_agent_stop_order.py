"""A Ray node agent serves its calls on many threads, in no set order: the engine's ``stop`` (a
cancel) or ``forget`` (a release) of a replica can run before the ``run`` call that starts its
launcher. Either must still hold: the launcher never starts, and ``run`` answers ``Cancelled``.

Dropped, the stop left the command running until the engine's ``CANCEL_SLACK`` backstop (15 s).
No cluster: the agent runs in this process, as in its Ray worker; a launcher, if one wrongly
starts, is a real process that the test stops again.
"""

from __future__ import annotations

import sys
import threading

import pytest

from tests.integration.test_launcher_support import make_config, report_server  # noqa: F401  (a fixture)
from trainyard.engines.ray.actor import NodeAgent
from trainyard.status import Reason

FOREVER = [sys.executable, "-c", "import time; time.sleep(600)"]


def _run_after(agent: NodeAgent, key: str, config, workdir) -> tuple[dict, threading.Thread]:
    out: dict = {}
    runner = threading.Thread(target=lambda: out.update(r=agent.run(key, config.to_dict(), str(workdir))), daemon=True)
    runner.start()
    runner.join(10)  # the answer comes at once; a launcher that starts would run for ever
    return out, runner


@pytest.mark.parametrize("early", ["stop", "forget"])
def test_a_stop_or_forget_that_comes_before_the_run_call_keeps_the_launcher_from_starting(
        tmp_path, report_server, early):
    key, workdir = f"{early}-1-r0", tmp_path / "attempts" / f"{early}-1" / "r0"
    config = make_config(tmp_path / "draft", report_server.url, FOREVER, grace_period=0.5, exit_report_deadline=5)
    agent = NodeAgent()

    # when the stop (a cancel) or the forget (a release) is served before the run call
    getattr(agent, early)(key)
    out, runner = _run_after(agent, key, config, workdir)
    try:
        # then run answers at once, cancelled, and no launcher was started
        assert not runner.is_alive(), "the launcher started and runs its command"
        assert out["r"].reason == Reason.CANCELLED, out["r"]
        assert not (workdir / "launch.json").exists()
    finally:
        agent.forget(key)  # what a failed run started
        agent.stop(key)
        runner.join(30)


def test_an_agent_that_was_only_told_to_stop_still_reads_what_an_earlier_launcher_left(tmp_path):
    # a stop for a replica this agent never ran (it restarted) must not hide the folder's own state
    agent = NodeAgent()
    agent.stop("g-1-r0")
    assert agent.run("g-1-r0", None, str(tmp_path / "attempts" / "g-1" / "r0")) == "not-started"
