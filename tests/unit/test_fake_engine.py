"""FakeEngine.join: it returns once the platform has seen an attempt end, and re-raises what went wrong."""

from __future__ import annotations

import threading
import time

import pytest

from trainyard.engines.fake import EngineMisuse, FakeEngine
from trainyard.launch.config import LaunchConfig
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, NodeInfo, ReplicaInfo
from trainyard.status import AttemptStatus

SPEC = JobSpec(command="x")


def attempt(attempt_id: str, node: str = "n", status: AttemptStatus = AttemptStatus.RUNNING) -> AttemptInfo:
    return AttemptInfo(id=attempt_id, job_id="j", number=1, status=status, created_at=0.0,
                       replicas=[ReplicaInfo(index=0, node=node, status=status)])


def config(attempt_id: str) -> LaunchConfig:
    return LaunchConfig(job_id="j", attempt_id=attempt_id, attempt=1, server="http://x", command=["x"])


def launched(engine: FakeEngine, attempt_id: str) -> AttemptInfo:
    a = attempt(attempt_id)
    engine.launch(a, SPEC, [config(attempt_id)])
    return a


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine([NodeInfo(name="n", cpu=4, memory=2**30)])


def test_join_returns_once_a_reconcile_no_longer_lists_the_attempt(engine):
    # given a launched attempt that the test makes exit
    a = launched(engine, "a-1")
    engine.finish("a-1", exit_code=0)

    # when the platform reconciles it (seeing the exit), then records the end (no longer listing it)
    assert [o.state for o in engine.reconcile([a])] == ["exited"]
    with pytest.raises(TimeoutError, match="a-1"):
        engine.join("a-1", timeout=0.05)  # seen, but not yet recorded as far as the fake can tell
    engine.reconcile([])

    # then join returns at once, for that attempt and for all
    engine.join("a-1", timeout=0.05)
    engine.join(timeout=0.05)


def test_join_wakes_up_when_the_platform_reconciles(engine):
    # given a launched attempt and a waiter
    a = launched(engine, "a-1")
    engine.lose("a-1")
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (engine.join("a-1", timeout=5), done.set()))
    waiter.start()

    # when the platform's loop reconciles twice, from its own thread
    engine.reconcile([a])
    time.sleep(0.05)
    assert not done.is_set()
    engine.reconcile([])

    # then the waiter returns
    waiter.join(5)
    assert done.is_set()


def test_join_reraises_a_launch_no_engine_could_do(engine):
    # given the platform placed an attempt on a node the engine does not have (its loop only logs the error)
    with pytest.raises(EngineMisuse):
        engine.launch(attempt("b-1", node="elsewhere"), SPEC, [config("b-1")])

    # when a test joins, then the error comes back to it
    with pytest.raises(EngineMisuse, match="elsewhere"):
        engine.join(timeout=0.05)


def test_join_without_an_attempt_waits_for_every_outcome_given_but_not_for_running_ones(engine):
    # given one attempt cancelled by the platform and one that keeps running
    stopped, running = launched(engine, "c-1"), launched(engine, "d-1")
    engine.cancel(stopped)

    # when the cancel is seen and its end recorded
    engine.reconcile([stopped, running])
    engine.reconcile([running])

    # then join() returns, while the running one is still waited for by name
    engine.join(timeout=0.05)
    with pytest.raises(TimeoutError, match="d-1"):
        engine.join("d-1", timeout=0.05)
