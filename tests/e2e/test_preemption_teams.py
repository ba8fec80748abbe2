"""Preemption between teams on a real `trainyard server --auth` with real processes: a quota is a guarantee, so
a member's urgent job stops other teams' borrowed work and its own team's work, never another team's work
inside that team's quota."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import until
from tests.support.servers import ServerProcess
from trainyard.sdk.client import Client

pytestmark = pytest.mark.slow


@pytest.fixture
def srv(tmp_path):
    s = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "4", "--memory", "4Gi"])
    s.start()
    yield s
    s.stop_all()


def sleeper(name: str, queue: str, priority: str, cpu: int) -> dict:
    return {"name": name, "command": ["sleep", "300"], "queue": queue, "priority": priority,
            "resources": {"cpu": cpu}, "grace_period": "1s"}


def running(handle):  # noqa: ANN001, ANN201
    until(lambda: handle.refresh().status.value == "running", timeout=60)
    return handle


def test_an_urgent_job_stops_borrowed_work_and_its_own_teams_never_another_teams_in_its_quota(srv):
    # given alice in vision (queues vision, 1 core, and vision-2, 2 cores) and bob in nlp (queue nlp, 1 core)
    admin = srv.client()
    for queue, team, cpu in (("vision", "vision", 1), ("vision-2", "vision", 2), ("vision-3", "vision", 1),
                             ("nlp", "nlp", 1)):
        # the admin lets its members' jobs be urgent (above normal, a queue's ceiling where it has none)
        admin.create_queue({"name": queue, "team": team, "quota": {"cpu": cpu}, "max_priority": "urgent"})
    users = {name: Client(srv.url, token=admin.identity.create_user(name, team=team, role="member").token.secret)
             for name, team in (("alice", "vision"), ("bob", "nlp"))}
    alice, bob = users["alice"], users["bob"]
    # and the 4 cores full: alice's normal job inside vision's quota, bob's low-priority one inside nlp's,
    # and bob's second one beyond it (borrowed)
    mine = running(alice.submit(sleeper("mine", "vision", "normal", 1)))
    theirs = running(bob.submit(sleeper("theirs", "nlp", "low", 1)))
    borrowed = running(bob.submit(sleeper("borrowed", "nlp", "low", 2)))
    # when alice submits an urgent job inside vision-2's quota
    urgent = running(alice.submit(sleeper("urgent", "vision-2", "urgent", 2)))
    # then bob's borrowed job made room for it
    assert borrowed.refresh().attempts[0].preempted_by == urgent.id
    # and when she submits another, inside vision-3's quota, it stops her own team's job, not bob's
    # guaranteed one (the cheaper to stop: its priority is lower)
    again = running(alice.submit(sleeper("again", "vision-3", "urgent", 1)))
    assert mine.refresh().attempts[0].preempted_by == again.id
    info = theirs.refresh()
    assert info.status.value == "running" and len(info.attempts) == 1 and not info.attempts[0].stop_reason
    for h in (mine, theirs, borrowed, urgent, again):
        h.cancel()
