"""The Ray engine's node agent without a cluster: what attaching answers, and a stop while it waits for Ray
to place the bundle (the placement group stands in; its ``wait`` is the only call the agent makes on it)."""

import json
import threading

from trainyard.engines.ray.actor import LOST, NOT_STARTED, NodeAgent
from trainyard.status import Reason


def test_attaching_to_a_replica_the_agent_never_heard_of_says_what_its_folder_shows(tmp_path):
    agent = NodeAgent()
    never = tmp_path / "never"
    assert agent.run("a-1-r0", None, str(never)) == NOT_STARTED  # nothing started there: launch it again

    started = tmp_path / "started"
    started.mkdir()
    (started / "launch.json").write_text("{}")
    assert agent.run("b-1-r0", None, str(started)) == LOST  # started, no result: its launcher went with the agent

    (started / "result.json").write_text(json.dumps({"exit_code": 3, "reason": "Error(exit 3)", "message": ""}))
    result = agent.run("b-1-r0", None, str(started))
    assert (result.exit_code, result.reason) == (3, Reason.error(3))


class Unplaced:
    """A placement group Ray never places (another user holds its node)."""

    def __init__(self) -> None:
        self.asked = threading.Event()

    def wait(self, timeout: float) -> bool:
        self.asked.set()
        threading.Event().wait(min(timeout, 0.05))
        return False


def test_a_replica_released_while_its_bundle_waits_ends_cancelled_and_never_starts(tmp_path):
    agent, pg, out = NodeAgent(), Unplaced(), {}
    waiter = threading.Thread(target=lambda: out.update(r=agent.run("c-1-r0", {"command": ["true"]},
                                                                    str(tmp_path / "c"), None, pg)))
    waiter.start()
    assert pg.asked.wait(10)
    assert agent.stop("unknown-r0") is False  # a stop for a key it does not hold changes nothing

    agent.forget("c-1-r0")  # the engine released the attempt (a cancel of a gang Ray had not placed)
    waiter.join(10)
    assert not waiter.is_alive() and out["r"].reason == Reason.CANCELLED
    assert not (tmp_path / "c").exists()  # no launch.json written, no launcher started


def test_the_engine_reads_each_answer_of_a_run_call_as_what_it_means():
    from trainyard.engines.ray.engine import as_result

    assert as_result(LOST) == LOST and as_result(NOT_STARTED) == NOT_STARTED and as_result(None) is None
    answered = as_result({"exit_code": 0, "reason": "Succeeded", "message": ""})
    assert answered.reason == Reason.SUCCEEDED
