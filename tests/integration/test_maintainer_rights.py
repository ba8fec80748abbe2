"""What a team's maintainer may do to a member's work where members' jobs run as their own Unix accounts: cancel it,
but not run code as the member. A command in the member's job (`exec`) ran as the member's account, and a new
version of the member's service ran the maintainer's code as the member; now both are the owner's (or an admin's),
while a maintainer still cancels, scales and deletes. In-process with the fake engine, as root (a mapped account
needs it)."""

from __future__ import annotations

import os

import pytest

from tests.integration.test_api import report
from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a user mapped to a Unix account needs a root server")

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]
JOB = {"queue": "vision-q", "resources": {"cpu": 1}}


@pytest.fixture
def team(tmp_path):
    """alice (a member, run as `nobody`), carol (the team's maintainer), vic (a viewer): the server, their headers."""
    with in_process(f"sqlite:///{tmp_path / 'db'}", tmp_path / "home", NODES, auth=True) as e:
        e.sdk.create_queue({"name": "vision-q", "team": "vision"})
        made = {n: e.sdk.identity.create_user(n, team="vision", role=r, os_user=u).token.secret
                for n, r, u in [("alice", "member", "nobody"), ("carol", "maintainer", None), ("vic", "viewer", None)]}
        # the platform binds this for the local engine only (jobs of other engines run as no account)
        e.platform.replica_requests.runs_as = e.platform.serving.runs_as = e.platform.identity.run_as
        e.platform.dask.runs_as = e.platform.identity.run_as
        yield e, *({"Authorization": f"Bearer {made[n]}"} for n in ("alice", "carol", "vic"))


def test_only_the_owner_or_an_admin_runs_commands_in_a_job_run_as_the_owners_account(team):
    e, alice, carol, vic = team
    job = e.tc.post("/api/v1/jobs", json={"spec": {**JOB, "command": "train"}}, headers=alice).json()
    attempt = until(lambda: next(iter(e.engine.launched), None))
    report(e.tc, e.engine, attempt, phase="running", pid=1)
    body = {"argv": ["cat", "/home/alice/.ssh/id_ed25519"]}
    refused = e.tc.post(f"/api/v1/jobs/{job['id']}/exec", json=body, headers=carol)
    assert refused.status_code == 403, refused.text  # the old code queued it, to run as nobody
    assert "runs as alice's Unix account nobody: only alice or an admin" in refused.json()["message"]
    assert e.tc.post(f"/api/v1/jobs/{job['id']}/cancel", headers=carol).status_code == 200  # still theirs to stop
    mine = e.tc.post("/api/v1/jobs", json={"spec": {**JOB, "command": "eval"}}, headers=alice).json()
    attempt = until(lambda: next((a for a in e.engine.launched if a.startswith(mine["id"])), None))
    report(e.tc, e.engine, attempt, phase="running", pid=1)
    assert e.tc.post(f"/api/v1/jobs/{mine['id']}/exec", json=body, headers=alice).status_code == 202
    assert e.tc.post(f"/api/v1/jobs/{mine['id']}/exec", json=body).status_code == 202  # the server's admin


def test_only_the_owner_or_an_admin_changes_the_spec_of_a_service_run_as_the_owners_account(team):
    e, alice, carol, vic = team
    spec = {**JOB, "name": "web", "command": ["python", "app.py"], "service": {"replicas": 1}}
    assert e.tc.post("/api/v1/services", json={"spec": spec}, headers=alice).status_code in (200, 201)
    until(lambda: len(e.engine.launched) == 1)
    changed = {**spec, "command": ["python", "-c", "print(open('/home/alice/.ssh/id_ed25519').read())"]}
    r = e.tc.post("/api/v1/services", json={"spec": changed}, headers=carol)
    # the old code rolled it out: carol's code, run as alice's account
    assert r.status_code == 403 and "only alice or an admin may change its spec" in r.json()["message"], r.text
    assert e.tc.get("/api/v1/services/web").json()["version"] == 1
    scaled = e.tc.post("/api/v1/services/web/scale", json={"replicas": 2}, headers=carol)  # alice's own code
    assert scaled.status_code == 200, scaled.text
    mine = e.tc.post("/api/v1/services", json={"spec": {**changed, "command": ["python", "v2.py"]}}, headers=alice)
    assert mine.status_code == 200 and mine.json()["owner"] == "alice" and mine.json()["version"] == 2, mine.text


def test_a_dask_clusters_client_credentials_are_for_whom_may_run_code_as_its_workers(team):
    e, alice, carol, vic = team
    made = e.tc.post("/api/v1/clusters", json={"name": "etl", "queue": "vision-q", "workers": 0},
                     headers=alice)
    assert made.status_code == 201, made.text
    url = f"/api/v1/clusters/{made.json()['id']}/tls"
    viewer = e.tc.get(url, headers=vic)  # the old code handed a viewer the key: code on alice's workers
    assert viewer.status_code == 403 and "only alice, the team's maintainers or an admin" in viewer.text
    maintainer = e.tc.get(url, headers=carol)  # would run as alice's account
    assert maintainer.status_code == 403 and "run as alice's Unix account nobody" in maintainer.text
    assert e.tc.get(url, headers=alice).json()["key"].startswith("-----BEGIN")
    assert e.tc.get(url).status_code == 200  # the server's admin


def test_a_maintainer_defines_the_teams_queues_but_not_the_default_one_every_team_shares(team):
    e, alice, carol, vic = team
    taken = e.tc.post("/api/v1/queues", json={"queue": {"name": "default", "team": "vision", "quota": {"cpu": 1}}},
                      headers=carol)
    # the old code made it vision's: every other team's jobs that name no queue were refused, or held to its quota
    assert taken.status_code == 403 and taken.json()["details"]["field"] == "name", taken.text
    assert e.tc.delete("/api/v1/queues/default", headers=carol).status_code == 403
    own = e.tc.post("/api/v1/queues", json={"queue": {"name": "vision-big", "team": "vision"}}, headers=carol)
    assert own.status_code == 201, own.text
    admin = e.tc.post("/api/v1/queues", json={"queue": {"name": "default", "quota": {"cpu": 64}}})
    assert admin.status_code == 201, admin.text
