"""Schedules against a real `trainyard server` on the real clock: a six-field cron is refused at submit, and one
stored before is held paused, never fired; on a server told to fire those each second (tests only), one every two
seconds fires so, each run is a real job that sees its own fire time, a run still going makes the next fire skip,
a pause stops the fires; with users on, a schedule is its team's, and its owner's being disabled stops its
fires."""

from __future__ import annotations

import time
from datetime import datetime

import httpx
import pytest

from tests.conftest import host_server
from tests.e2e import test_identity as identity
from tests.e2e.helpers import stored_schedule as stored, until
from trainyard.envvars import TEST_SECOND_CRONS

pytestmark = pytest.mark.slow


def schedule(name: str, cron: str, command: str, **spec) -> dict:
    return {"spec": {"name": name, "cron": cron, "job": {"name": name, "command": command,
                                                         "resources": {"cpu": "100m"}}, **spec}}


def test_a_six_field_cron_is_refused_naming_the_field_and_nothing_is_made(server):
    r = httpx.post(server.url + "/api/v1/schedules", json=schedule("tick", "* * * * * *", "true"),
                   headers=server.headers, timeout=30)
    assert r.status_code == 422, r.text
    [error] = r.json()["details"]["errors"]
    assert error["field"] == "cron" and "has 6 fields; a cron has five: minute hour" in error["message"], error
    assert httpx.get(server.url + "/api/v1/schedules", headers=server.headers).json()["items"] == []


def test_a_stored_six_field_cron_is_held_paused_saying_why_and_never_fires(server):
    http = httpx.Client(base_url=server.url, headers=server.headers, timeout=60)
    # given a schedule stored with six fields before they were refused: every second, as cronsim reads them
    stored(server, schedule("tick", "* * * * * *", "true"))
    # when the server's loop has had it due a few times over
    held = until(lambda: (s := http.get("/api/v1/schedules/tick").json())["updated_at"] > s["created_at"] and s,
                 timeout=30, every=0.5)
    time.sleep(2)
    # then it is paused, saying why, nothing was fired, and the server said so once
    assert (held["suspended"], held["next_at"], held["runs"]) == (True, None, [])
    assert held["held"].startswith("cron: '* * * * * *' has 6 fields; a cron has five"), held
    assert http.get("/api/v1/schedules/tick").json()["runs"] == [] and http.get("/api/v1/jobs").json()["items"] == []
    assert server.log_path.read_text().count("is held paused, not fired") == 1
    # and a resume is refused naming the cron
    r = http.post("/api/v1/schedules/tick/resume")
    assert r.status_code == 409 and r.json()["details"]["field"] == "cron", r.text


@pytest.fixture
def seconds_server(tmp_path, monkeypatch):
    """A real server that fires stored six-field crons each second they name (its tests-only variable)."""
    monkeypatch.setenv(TEST_SECOND_CRONS, "1")
    srv = host_server(tmp_path / "home")
    yield srv
    srv.stop_all()


def test_a_schedule_fires_on_its_cron_skips_while_its_run_runs_and_stops_when_paused(seconds_server):
    server = seconds_server
    http = httpx.Client(base_url=server.url, headers=server.headers, timeout=60)
    # given a schedule every two seconds whose job prints its fire time, and one every second whose job sleeps
    stored(server, schedule("tick", "*/2 * * * * *", "echo fired {{params.scheduled_at}}"))
    stored(server, schedule("slow", "* * * * * *", "sleep 4"))
    # when the clock runs on
    started = until(lambda: (r := [x for x in http.get("/api/v1/schedules/tick").json()["runs"]
                                   if x["outcome"] == "started"])[1:] and r, timeout=60, every=0.5)
    # then each fire was due on an even second, two seconds or a multiple apart, and its job printed that time
    ats = sorted(r["at"] for r in started)
    assert all(at % 2 == 0 for at in ats) and all((b - a) % 2 == 0 and b > a for a, b in zip(ats, ats[1:]))
    for run in started[:2]:
        job = http.get(f"/api/v1/jobs/{run['job_id']}/wait", params={"timeout": 60}).json()
        assert job["status"] == "succeeded", job
        log = "".join(c["data"] for c in http.get(f"/api/v1/jobs/{run['job_id']}/logs").json()["chunks"])
        assert datetime.fromisoformat(log.split()[1]).timestamp() == run["at"], log
    # and the sleeping job's schedule skipped the fires that came while its run ran, naming it
    slow_runs = until(lambda: (r := http.get("/api/v1/schedules/slow").json()["runs"])
                      and any(x["outcome"] == "skipped" for x in r) and r, timeout=60, every=0.5)
    skipped = next(x for x in slow_runs if x["outcome"] == "skipped")
    assert skipped["message"].endswith("still running (concurrency: forbid)")
    assert skipped["message"].split()[0] in [x["job_id"] for x in slow_runs if x["outcome"] == "started"]
    assert len(http.get("/api/v1/schedules/slow").json()["active"]) <= 1
    # when paused, no more fires come
    for name in ("tick", "slow"):
        assert http.post(f"/api/v1/schedules/{name}/pause").json()["suspended"] is True
    newest = {n: http.get(f"/api/v1/schedules/{n}").json()["runs"][0] for n in ("tick", "slow")}
    time.sleep(4)
    assert {n: http.get(f"/api/v1/schedules/{n}").json()["runs"][0] for n in ("tick", "slow")} == newest
    listed = http.get("/api/v1/schedules").json()["items"]
    assert [(s["name"], s["next_at"]) for s in listed] == [("slow", None), ("tick", None)]  # newest first
    assert listed[1]["explain"] == "Every second second of every minute"


def test_with_users_a_schedule_is_its_teams_and_stops_firing_when_its_owner_is_disabled(auth_server):
    srv = auth_server
    admin = identity.As(srv, (srv.home / "first-admin-token").read_text().strip())
    tokens = {}
    for name, team, role in [("alice", "vision", "member"), ("bob", "nlp", "member"), ("vera", "vision", "viewer")]:
        made = admin.post("/api/v1/users", json={"name": name, "team": team, "role": role})
        assert made.status_code == 201, made.text
        tokens[name] = made.json()["token"]["secret"]
    for q, team in (("vision-q", "vision"), ("nlp-q", "nlp")):
        assert admin.post("/api/v1/queues", json={"queue": {"name": q, "team": team}}).status_code == 201
    alice, bob, vera = (identity.As(srv, tokens[n]) for n in ("alice", "bob", "vera"))
    body = schedule("hourly-eval", "@hourly", "true")
    body["spec"]["job"]["queue"] = "vision-q"
    # a viewer may not make one (she may not submit); a member may, in her team's queue
    assert vera.post("/api/v1/schedules", json=body).status_code == 403
    made = alice.post("/api/v1/schedules", json=body)
    assert made.status_code == 201, made.text
    assert (made.json()["team"], made.json()["owner"]) == ("vision", "alice")
    # another team neither sees nor triggers it
    assert bob.get("/api/v1/schedules").json()["items"] == []
    assert bob.post("/api/v1/schedules/hourly-eval/trigger").status_code == 404
    assert [s["name"] for s in vera.get("/api/v1/schedules").json()["items"]] == ["hourly-eval"]
    assert vera.post("/api/v1/schedules/hourly-eval/pause").status_code == 403
    # its fire runs as alice, in her team
    run = alice.post("/api/v1/schedules/hourly-eval/trigger").json()
    assert run["outcome"] == "started", run
    job = alice.get(f"/api/v1/jobs/{run['job_id']}").json()
    assert (job["owner"], job["team"]) == ("alice", "vision")
    # once alice is disabled, a fire starts nothing, and says why
    assert admin.post("/api/v1/users/alice/disable").status_code == 200
    late = admin.post(f"/api/v1/schedules/{made.json()['id']}/trigger").json()
    assert (late["outcome"], late["job_id"]) == ("failed", None)
    assert "owner alice is disabled" in late["message"]
    actions = [e["action"] for e in admin.get("/api/v1/audit").json()]
    assert {"schedule.create", "schedule.trigger"} <= set(actions)
