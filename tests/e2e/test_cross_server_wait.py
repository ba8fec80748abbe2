"""Long polls held by one server while another server sharing its PostgreSQL changes the job or run:
each answers with the new state soon after the change, never only at the timeout its client asked for.

The leader hears in-process what it does itself (the ends its launchers report, its own cancels); a
change written by the other server reaches a long poll only through the database."""

from __future__ import annotations

import json
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest

from tests.e2e.helpers import py_job, until
from tests.e2e.test_leader import free_port
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
CAPACITY = ["--cpus", "4", "--memory", "8Gi"]
POLL = 60  # seconds each long poll asks for: the change must answer it long before
PROMPT = 30  # what "long before" allows on a loaded machine (an answer at the timeout is a bug)
SMALL = {"cpu": 0.1, "memory": "64Mi"}


@pytest.fixture(scope="module")
def pair(pg_server, tmp_path_factory):
    """(leader, follower): two server processes on one fresh PostgreSQL database, started in that order."""
    import psycopg

    name = "t_" + secrets.token_hex(6)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = pg_server.rsplit("/", 1)[0] + "/" + name
    home = tmp_path_factory.mktemp("cross") / "home"
    leader, follower = ServerProcess(home, CAPACITY, db=url), ServerProcess(home, CAPACITY, db=url)
    try:
        leader.start(port=free_port())
        follower.start(port=free_port())
        assert (leader.role(), follower.role()) == ("leader", "follower")
        yield leader, follower
    finally:
        leader.stop_all()
        follower.stop_all()
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def blocked(pair):
    """A job holding every CPU, so that a job asking for them all stays pending; cancelled afterwards."""
    leader, _ = pair
    c = leader.client()
    blocker = c.submit(py_job("import time; time.sleep(600)", name="blocker", resources={"cpu": 4, "memory": "64Mi"}))
    until(lambda: c.get(blocker.id).status.value == "running", timeout=60)
    yield
    c.cancel(blocker.id)
    c.wait(blocker.id, timeout=60)


def pending_job(server: ServerProcess) -> str:
    job = server.client().submit(py_job("pass", name="waits", resources={"cpu": 4, "memory": "64Mi"}))
    return job.id


def gated_job(server: ServerProcess, gate, name: str = "gated") -> str:
    """A running job that prints a line and ends once ``gate`` exists; its id, once it runs."""
    code = (f"import os, time\nprint('started', flush=True)\nwhile not os.path.exists({str(gate)!r}): "
            f"time.sleep(0.05)\nprint('gate seen', flush=True)")
    c = server.client()
    job = c.submit(py_job(code, name=name, resources=SMALL))
    until(lambda: c.get(job.id).status.value == "running", timeout=60)
    return job.id


class Held:
    """One request held in a thread of its own: its answer and how long it took."""

    def __init__(self, fn) -> None:  # noqa: ANN001
        self._pool = ThreadPoolExecutor(1)
        self.started = time.monotonic()
        self._done: Future = self._pool.submit(self._timed, fn)

    def _timed(self, fn):  # noqa: ANN001, ANN202
        value = fn()
        return value, time.monotonic() - self.started

    def result(self):  # noqa: ANN201
        try:
            return self._done.result(timeout=POLL + 30)
        finally:
            self._pool.shutdown()


def hold_wait(server: ServerProcess, path: str, **params) -> Held:
    """A long poll of ``path`` (``/api/v1/...``), its answer as JSON."""
    def call():  # noqa: ANN202
        r = httpx.get(server.url + path, params={"timeout": POLL, **params}, headers=server.headers,
                      timeout=POLL + 20)
        r.raise_for_status()
        return r.json()
    held = Held(call)
    time.sleep(1.5)  # let it reach the server and wait there before the change
    return held


def hold_follow(server: ServerProcess, job_id: str) -> Held:
    """A log follow of ``job_id``: the data lines it got and the status its end event named."""
    def call():  # noqa: ANN202
        lines, end = [], None
        with httpx.stream("GET", server.url + f"/api/v1/jobs/{job_id}/logs", params={"follow": True},
                          headers=server.headers, timeout=POLL + 20) as r:
            event = None
            for line in r.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:"):
                    data = json.loads(line.split(":", 1)[1])
                    if event == "end":
                        end = data["status"]
                        break
                    lines.append(data["data"])
        return lines, end
    held = Held(call)
    time.sleep(1.5)
    return held


def answered(held: Held):  # noqa: ANN201
    value, took = held.result()
    assert took < PROMPT, f"answered after {took:.1f}s: only at its {POLL}s timeout, not by the change"
    print(f"answered {took:.2f}s after the poll began")
    return value


# -- a job's long poll --------------------------------------------------------------------------------


def test_a_cancel_through_the_follower_answers_the_leaders_long_poll(pair, blocked):
    leader, follower = pair
    job_id = pending_job(leader)
    held = hold_wait(leader, f"/api/v1/jobs/{job_id}/wait")
    follower.client().cancel(job_id)  # pending: cancelled at once, written by the follower
    assert answered(held)["status"] == "cancelled"


def test_a_cancel_through_the_leader_answers_the_followers_long_poll(pair, blocked):
    leader, follower = pair
    job_id = pending_job(follower)
    held = hold_wait(follower, f"/api/v1/jobs/{job_id}/wait")
    leader.client().cancel(job_id)
    assert answered(held)["status"] == "cancelled"


def test_an_end_the_leader_hears_answers_the_followers_long_poll(pair, tmp_path):
    leader, follower = pair
    job_id = gated_job(leader, tmp_path / "gate")
    held = hold_wait(follower, f"/api/v1/jobs/{job_id}/wait")
    (tmp_path / "gate").touch()  # the job ends; its launcher reports that to the leader
    assert answered(held)["status"] == "succeeded"


def test_a_cancel_of_a_running_job_through_the_follower_answers_the_leaders_long_poll(pair, tmp_path):
    leader, follower = pair
    job_id = gated_job(follower, tmp_path / "gate")
    held = hold_wait(leader, f"/api/v1/jobs/{job_id}/wait")
    follower.client().cancel(job_id)  # cancelling, written by the follower; the launcher hears it from the leader
    assert answered(held)["status"] == "cancelled"


# -- log streams ----------------------------------------------------------------------------------------


def test_the_followers_log_stream_gets_the_lines_and_the_end_the_leader_hears(pair, tmp_path):
    leader, follower = pair
    job_id = gated_job(leader, tmp_path / "gate")
    held = hold_follow(follower, job_id)
    (tmp_path / "gate").touch()
    lines, end = answered(held)
    assert "".join(lines).split() == ["started", "gate", "seen"] and end == "succeeded"


def test_the_leaders_log_stream_ends_when_the_follower_cancels_the_job(pair, blocked):
    leader, follower = pair
    job_id = pending_job(leader)
    held = hold_follow(leader, job_id)
    follower.client().cancel(job_id)
    assert answered(held) == ([], "cancelled")


# -- a pipeline run's long poll -----------------------------------------------------------------------


def run_pipeline(server: ServerProcess, resources: dict, code: str = "pass") -> str:
    spec = {"name": "cross", "steps": {"only": {"command": ["python", "-c", code], "resources": resources}}}
    r = httpx.post(server.url + "/api/v1/pipelines", json={"spec": spec}, headers=server.headers, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_a_run_cancelled_through_the_follower_answers_the_leaders_long_poll(pair, blocked):
    leader, follower = pair
    run_id = run_pipeline(leader, {"cpu": 4, "memory": "64Mi"})  # its step stays pending
    held = hold_wait(leader, f"/api/v1/pipelines/{run_id}/wait")
    follower.client().pipelines.cancel(run_id)
    assert answered(held)["status"] == "cancelled"


def test_a_run_the_leader_ends_answers_the_followers_long_poll(pair, tmp_path):
    leader, follower = pair
    gate = tmp_path / "gate"
    run_id = run_pipeline(leader, SMALL, f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)")
    held = hold_wait(follower, f"/api/v1/pipelines/{run_id}/wait")
    threading.Timer(0.5, gate.touch).start()
    assert answered(held)["status"] == "succeeded"
