"""An attempt's end is taken from its launcher, which the job may speak for (it can read its attempt's credential
where it runs as the server's user): a stop the server never asked for (preempted, drained, cancelled) is not
taken on its word. Such a report is a failure of the job's own, retried only as its policy says; a stop the server
did ask for keeps its reason. In-process with the fake engine, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from tests.integration.test_api import report
from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]


def _launched(e, job_id: str, n: int = 1) -> str:  # noqa: ANN001
    return until(lambda: sorted(a for a in e.engine.launched if a.startswith(job_id))[n - 1:n] or None,
                 timeout=10)[0]


@pytest.mark.parametrize("claimed", ["Preempted", "NodeDrained", "Cancelled"])
def test_a_stop_the_server_never_asked_for_is_the_jobs_own_failure(db_url, tmp_path, claimed):
    with in_process(db_url, tmp_path / "home", NODES) as e:
        job = e.sdk.submit({"name": "j", "command": "x", "retry": {"max": 0}})
        attempt = _launched(e, job.id)
        report(e.tc, e.engine, attempt, phase="running", pid=1)
        report(e.tc, e.engine, attempt, phase="exited", pid=1,
               result={"exit_code": -15, "reason": claimed, "outputs": []})
        until(lambda: job.status == "failed", timeout=10)  # not requeued, not cancelled
        attempts = job.refresh().attempts
        assert attempts[-1].reason == "Error(exit -15)" and len(attempts) == 1


def test_a_preemption_the_server_asked_for_keeps_its_reason_and_requeues(db_url, tmp_path):
    with in_process(db_url, tmp_path / "home", NODES) as e:
        job = e.sdk.submit({"name": "j", "command": "x", "retry": {"max": 0}})
        attempt = _launched(e, job.id)
        report(e.tc, e.engine, attempt, phase="running", pid=1)
        # the launcher's report below is what ends the attempt (the fake's own end of a cancel would come first on
        # a slow machine, and the report would get 410)
        e.engine.cancel_ends = False
        assert e.platform.store.preempt(attempt, "j-other")  # as the scheduler marks it
        report(e.tc, e.engine, attempt, phase="exited", pid=1,
               result={"exit_code": -15, "reason": "Preempted", "outputs": []})
        _launched(e, job.id, 2)  # requeued after preemption, whatever its retries
        assert job.refresh().attempts[0].reason == "Preempted"
