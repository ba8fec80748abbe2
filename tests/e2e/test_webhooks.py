"""Webhooks against a real `trainyard server --auth` whose config names them, POSTing to a real HTTP server
on loopback: a member subscribes her team's failures and hears of a teammate's failed job, not of another
team's; a webhook kept for one team is refused to another; the CLI adds, lists and removes subscriptions."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.e2e import test_identity as identity
from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess
from tests.support.stub_http import JsonServer

pytestmark = pytest.mark.slow


@pytest.fixture
def receiver():
    r = JsonServer(lambda method, path: (200, {}), lambda req: (req.path, json.loads(req.body)))
    yield r
    r.close()


@pytest.fixture
def srv(tmp_path, receiver):
    config = tmp_path / "server.yaml"
    config.write_text(f"webhooks:\n  vision-alerts: {{url: '{receiver.url}/vision', teams: [vision]}}\n"
                      f"  chat: {{url: '{receiver.url}/chat', format: slack}}\n")
    s = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "2", "--memory", "4Gi", "--config", str(config)])
    s.start()
    yield s
    s.stop_all()


def cli(srv, token, *args):
    env = {**srv.env, "TRAINYARD_SERVER": srv.url, "TRAINYARD_TOKEN": token}
    return subprocess.run([sys.executable, "-m", "trainyard", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_team_subscription_hears_a_teammates_failure_and_not_another_teams(srv, receiver):
    admin = identity.As(srv, (srv.home / "first-admin-token").read_text().strip())
    tokens = {}
    for name, team in [("alice", "vision"), ("carol", "vision"), ("bob", "nlp")]:
        made = admin.post("/api/v1/users", json={"name": name, "team": team, "role": "member"})
        tokens[name] = made.json()["token"]["secret"]
    for q, team in (("vision-q", "vision"), ("nlp-q", "nlp")):
        assert admin.post("/api/v1/queues", json={"queue": {"name": q, "team": team}}).status_code == 201
    alice, carol, bob = (identity.As(srv, tokens[n]) for n in ("alice", "carol", "bob"))

    # bob sees only the webhook his team may use, and may not watch another team
    assert [h["name"] for h in bob.get("/api/v1/webhooks").json()] == ["chat"]
    assert bob.post("/api/v1/subscriptions", json={"webhook": "vision-alerts"}).status_code == 422
    refused = bob.post("/api/v1/subscriptions", json={"webhook": "chat", "scope": "team", "team": "vision"})
    assert refused.status_code == 422 and "no team 'vision'" in refused.text
    assert bob.post("/api/v1/subscriptions", json={"webhook": "chat", "scope": "all"}).status_code == 403

    # alice subscribes her team's failures from the CLI
    added = cli(srv, tokens["alice"], "notify", "add", "vision-alerts", "--team", "vision", "--on", "failed",
                "-l", "stage!=dev", "-l", "!scratch")  # carol's job has no labels: neither keeps it out
    assert added.returncode == 0, added.stderr
    assert "labelled stage!=dev,!scratch end failed" in added.stdout, added.stdout
    bad = cli(srv, tokens["alice"], "notify", "add", "vision-alerts", "-l", "stage in (a")
    assert bad.returncode == 2 and "labels" in bad.stderr and "parentheses" in bad.stderr, bad.stderr
    listed = cli(srv, tokens["alice"], "notify", "ls", "-o", "json")
    [sub] = json.loads(listed.stdout)
    assert (sub["webhook"], sub["scope"], sub["team"], sub["on"], sub["labels"]) == (
        "vision-alerts", "team", "vision", ["failed"], "stage!=dev,!scratch")
    assert bob.get(f"/api/v1/subscriptions/{sub['id']}").status_code == 404

    # when carol's job fails, and bob's too
    fail = py_job("import sys; sys.exit(4)", name="carol-train", queue="vision-q")
    job = carol.submit(fail).json()
    other = bob.submit({**fail, "name": "bob-train", "queue": "nlp-q"}).json()
    for who, j in ((carol, job), (bob, other)):
        assert who.get(f"/api/v1/jobs/{j['id']}/wait", params={"timeout": 60}).json()["status"] == "failed"
    # then alice's webhook heard of carol's, not of bob's
    until(lambda: receiver.got, timeout=20)
    time.sleep(3)  # the loop has looked again (every 2 s at most): bob's end had its chance
    [(path, told)] = receiver.got
    assert path == "/vision" and told["job"]["id"] == job["id"] and told["job"]["owner"] == "carol"
    deliveries = alice.get(f"/api/v1/subscriptions/{sub['id']}/deliveries").json()
    assert [(d["object_id"], d["status"]) for d in deliveries] == [(job["id"], "sent")]

    removed = cli(srv, tokens["alice"], "notify", "rm", sub["id"])
    assert removed.returncode == 0, removed.stderr
    assert alice.get("/api/v1/subscriptions").json()["items"] == []


def test_webhooks_lists_none_saying_where_they_are_named(server):
    r = server.cli("notify", "webhooks")
    assert r.returncode == 0 and r.stdout == "", r.stderr
    assert "no webhooks you may use: an admin names them under `webhooks:` in the server's --config" in r.stderr
