"""Preemption between teams through the server with auth, in-process on the fake engine (SQLite and PostgreSQL):
a quota is a guarantee, so a member's urgent job stops its own team's work and other teams' borrowed work,
never another team's work inside that team's quota."""

from __future__ import annotations

import pytest

from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.sdk.client import Client
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres


@pytest.fixture
def teams(db_url, tmp_path):
    """A server with auth on one node of ``cpus`` cores: alice in vision (queues vision and vision-2), bob in
    nlp (queue nlp), each queue with a quota of 2 cores and jobs up to urgent."""
    made = []

    def make(cpus: int):
        e = in_process(db_url, tmp_path / "home", [NodeInfo(name="a", cpu=cpus, memory=16 * 2**30)], auth=True)
        env = e.__enter__()
        made.append(e)
        users = {}
        for queue, team in (("vision", "vision"), ("vision-2", "vision"), ("nlp", "nlp")):
            # the admin lets its members' jobs be urgent (above normal, a queue's ceiling where it has none)
            env.sdk.create_queue({"name": queue, "team": team, "quota": {"cpu": 2}, "max_priority": "urgent"})
        for user, team in (("alice", "vision"), ("bob", "nlp")):
            secret = env.sdk.identity.create_user(user, team=team, role="member").token.secret
            users[user] = Client("http://testserver", token=secret, transport=env.tc._transport)
        return env, users

    yield make
    for e in made:
        e.__exit__(None, None, None)


def job(name: str, queue: str, priority: str) -> dict:
    return {"name": name, "command": "x", "queue": queue, "priority": priority, "resources": {"cpu": 2}}


def running(env, user: Client, spec: dict):  # noqa: ANN001, ANN201
    """``spec`` submitted by ``user``, once its attempt was launched."""
    handle = user.submit(spec)
    until(lambda: any(a.startswith(handle.id) for a in env.engine.launched), timeout=10)
    return handle


def test_an_urgent_job_stops_its_own_teams_work_not_another_teams_inside_its_quota(teams):
    env, u = teams(4)
    # given the node full: vision's normal work and nlp's low-priority work, each inside its quota
    mine = running(env, u["alice"], job("mine", "vision", "normal"))
    theirs = running(env, u["bob"], job("theirs", "nlp", "low"))
    # when alice submits an urgent job to vision's other queue
    urgent = u["alice"].submit(job("urgent", "vision-2", "urgent"))
    # then it stops her team's job, though nlp's costs less to stop, and starts
    until(lambda: mine.refresh().attempts[0].preempted_by == urgent.id, timeout=10)
    until(lambda: any(a.startswith(urgent.id) for a in env.engine.launched), timeout=10)
    assert theirs.refresh().status.value in ("starting", "running")
    assert not theirs.refresh().attempts[0].stop_reason
    assert not [a for a in env.engine.cancelled if a.startswith(theirs.id)]


def test_an_urgent_job_stops_another_teams_borrowed_work(teams):
    env, u = teams(6)
    # given the node full: vision's work inside its quota, and nlp's two jobs, the second beyond nlp's quota
    mine = running(env, u["alice"], job("mine", "vision", "normal"))
    quota = running(env, u["bob"], job("in-quota", "nlp", "low"))
    borrowed = running(env, u["bob"], job("borrowed", "nlp", "low"))
    # when alice submits an urgent job to vision's other queue
    urgent = u["alice"].submit(job("urgent", "vision-2", "urgent"))
    # then nlp's borrowed job goes, and neither nlp's guaranteed job nor her own
    until(lambda: borrowed.refresh().attempts[0].preempted_by == urgent.id, timeout=10)
    until(lambda: any(a.startswith(urgent.id) for a in env.engine.launched), timeout=10)
    assert not quota.refresh().attempts[0].stop_reason and not mine.refresh().attempts[0].stop_reason
