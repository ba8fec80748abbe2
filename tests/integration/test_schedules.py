"""Schedules through the API with a fake engine, on SQLite and PostgreSQL, the loop's clock given by the test.

The schedules fire on 1 January (``0 0 1 1 *``): the server's own loop, on the real clock, never
reaches them while a test runs; the test runs the loop's cycle at the times it names.
"""

from __future__ import annotations

from datetime import datetime, timezone

from tests.integration.test_api import env, report  # noqa: F401  (the fixture)
from tests.support.waiting import until

YEARLY = "0 0 1 1 *"


def jan1(year: int) -> float:
    return datetime(year, 1, 1, tzinfo=timezone.utc).timestamp()


def create(tc, **spec):
    body = {"spec": {"name": "nightly", "cron": YEARLY, "job": {"command": "echo {{params.scheduled_at}}"}, **spec}}
    r = tc.post("/api/v1/schedules", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def runs(tc, key):
    return tc.get(f"/api/v1/schedules/{key}").json()["runs"]


def test_a_fire_submits_the_job_as_its_owner_once_and_moves_to_the_next(env):  # noqa: F811
    tc, sdk, engine, platform = env
    made = create(tc)
    first = made["next_at"]
    assert datetime.fromtimestamp(first, timezone.utc).strftime("%m-%d %H:%M") == "01-01 00:00"
    assert made["explain"] == "At 00:00 on January 1" and made["suspended"] is False
    assert made["spec"]["job"]["params"] == {}  # the time each fire gives is no param of the schedule's own
    # when the loop looks a second after it is due, twice
    platform.schedule_loop.cycle(now=first + 1)
    platform.schedule_loop.cycle(now=first + 1)
    # then one job was submitted, with the fire's time as its param, and the next fire is a year on
    [run] = runs(tc, "nightly")
    assert (run["outcome"], run["at"], run["manual"]) == ("started", first, False)
    job = sdk.get(run["job_id"])
    assert job.spec.params["scheduled_at"] == datetime.fromtimestamp(first, timezone.utc).isoformat()
    assert job.spec.argv()[-1] == f"echo {job.spec.params['scheduled_at']}" and job.owner == "local"
    after = tc.get("/api/v1/schedules/nightly").json()
    assert after["last_at"] == first and after["next_at"] > first + 364 * 86400
    assert after["active"] == [run["job_id"]]
    assert "schedule.create" in [a.action for a in platform.store.audit(limit=20)]


def test_forbid_skips_while_the_last_run_runs_and_replace_cancels_it(env):  # noqa: F811
    tc, sdk, engine, platform = env
    forbid = create(tc, name="forbid")
    create(tc, name="replace", concurrency="replace")
    t1 = forbid["next_at"]
    platform.schedule_loop.cycle(now=t1 + 1)
    first = {s: runs(tc, s)[0]["job_id"] for s in ("forbid", "replace")}
    t2 = tc.get("/api/v1/schedules/forbid").json()["next_at"]
    # when the next year's fire comes while both first jobs still run (the fake engine runs nothing)
    platform.schedule_loop.cycle(now=t2 + 1)
    skipped = runs(tc, "forbid")[0]
    assert skipped["outcome"] == "skipped" and first["forbid"] in skipped["message"] and skipped["job_id"] is None
    replaced = runs(tc, "replace")[0]
    assert replaced["outcome"] == "started" and replaced["message"] == f"replaced {first['replace']}"
    until(lambda: sdk.get(first["replace"]).status.value in ("cancelling", "cancelled"))
    assert sdk.get(first["forbid"]).status.value in ("pending", "starting", "running")
    # and once the forbidding job ended, the next fire starts one again
    attempt = until(lambda: next((a for a in engine.launched if a.startswith(first["forbid"])), None))
    report(tc, engine, attempt, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    until(lambda: sdk.get(first["forbid"]).status.value == "succeeded")
    t3 = tc.get("/api/v1/schedules/forbid").json()["next_at"]
    platform.schedule_loop.cycle(now=t3 + 1)
    assert runs(tc, "forbid")[0]["outcome"] == "started"


def test_allow_overlaps_runs_up_to_a_bound(env, monkeypatch):  # noqa: F811
    from trainyard.services import schedules

    tc, sdk, engine, platform = env
    monkeypatch.setattr(schedules, "MAX_ACTIVE", 2)
    made = create(tc, concurrency="allow")
    at = made["next_at"]
    for _ in range(3):
        platform.schedule_loop.cycle(now=at + 1)
        at = tc.get("/api/v1/schedules/nightly").json()["next_at"]
    third, second, first = runs(tc, "nightly")
    assert [first["outcome"], second["outcome"]] == ["started", "started"]
    assert third["outcome"] == "skipped" and third["message"].startswith("2 of its runs have not ended")
    assert tc.get("/api/v1/schedules/nightly").json()["active"] == [first["job_id"], second["job_id"]]


def test_fires_missed_while_no_server_led_are_recorded_and_only_the_latest_in_time_is_made(env):  # noqa: F811
    tc, sdk, engine, platform = env
    made = create(tc, starting_deadline="1h")
    due = made["next_at"]
    year = datetime.fromtimestamp(due, timezone.utc).year
    # three years later, ten minutes after that year's fire: the three before were missed, the latest is made
    platform.schedule_loop.cycle(now=jan1(year + 3) + 600)
    latest, missed = runs(tc, "nightly")[:2]
    assert (latest["outcome"], latest["at"]) == ("started", jan1(year + 3))
    assert missed["outcome"] == "missed" and missed["at"] == due and missed["message"].startswith("3 fire(s)")
    # two hours after a fire (past its one-hour deadline): missed, nothing submitted
    platform.schedule_loop.cycle(now=jan1(year + 4) + 7200)
    late = runs(tc, "nightly")[0]
    assert late["outcome"] == "missed" and "past its starting_deadline" in late["message"]
    assert len([r for r in runs(tc, "nightly") if r["job_id"]]) == 1


def test_paused_it_does_not_fire_trigger_fires_now_and_delete_forgets_it(env):  # noqa: F811
    tc, sdk, engine, platform = env
    made = create(tc)
    paused = tc.post("/api/v1/schedules/nightly/pause").json()
    assert paused["suspended"] is True and paused["next_at"] is None
    platform.schedule_loop.cycle(now=made["next_at"] + 1)
    assert runs(tc, "nightly") == []
    run = tc.post(f"/api/v1/schedules/{made['id']}/trigger").json()
    assert run["outcome"] == "started" and run["manual"] is True and sdk.get(run["job_id"]).spec.name == "job"
    resumed = tc.post("/api/v1/schedules/nightly/resume").json()
    assert resumed["suspended"] is False and resumed["next_at"] == made["next_at"]
    assert tc.delete("/api/v1/schedules/nightly").status_code == 204
    assert tc.get("/api/v1/schedules/nightly").status_code == 404
    assert sdk.get(run["job_id"]).status.value in ("pending", "starting", "running")  # its job is left alone


def test_bad_specs_are_refused_naming_the_field_and_a_name_is_unique_in_its_team(env):  # noqa: F811
    tc, sdk, engine, platform = env
    for spec, field in [({"cron": "61 * * * *"}, "cron"), ({"timezone": "../../etc/passwd"}, "timezone"),
                        ({"cron": "0 0 30 2 *"}, "cron"), ({"starting_deadline": "soon"}, "starting_deadline"),
                        ({"concurrency": "sometimes"}, "concurrency"), ({"name": "../x"}, "name"),
                        ({"job": {"command": "echo {{params.nope}}"}}, "job")]:
        body = {"spec": {"name": "n", "cron": YEARLY, "job": {"command": "true"}, **spec}}
        r = tc.post("/api/v1/schedules", json=body)
        assert r.status_code == 422, (spec, r.text)
        assert any(e["field"].startswith(field) for e in r.json()["details"]["errors"]), (field, r.json())
    # a job no node could ever run is refused as its submit would be
    nowhere = tc.post("/api/v1/schedules", json={"spec": {"name": "n", "cron": YEARLY,
                                                          "job": {"command": "true", "resources": {"cpu": 512}}}})
    assert nowhere.status_code == 422 and "cpu" in nowhere.text
    create(tc)
    again = tc.post("/api/v1/schedules", json={"spec": {"name": "nightly", "cron": "@daily", "job": {"command": "true"}}})
    assert again.status_code == 409 and "nightly" in again.json()["message"]
    assert [s["name"] for s in tc.get("/api/v1/schedules").json()["items"]] == ["nightly"]


PIPELINE = {"name": "etl", "params": {"scheduled_at": "", "rows": 10},
            "steps": {"extract": {"command": "echo {{params.scheduled_at}} {{params.rows}}"},
                      "load": {"command": "true", "needs": ["extract"]}}}


def test_a_pipeline_schedule_starts_a_run_with_its_time_and_replace_cancels_the_last(env):  # noqa: F811
    tc, sdk, engine, platform = env
    body = {"spec": {"name": "etl-nightly", "cron": YEARLY, "pipeline": PIPELINE, "params": {"rows": 20},
                     "concurrency": "replace"}}
    made = tc.post("/api/v1/schedules", json=body)
    assert made.status_code == 201, made.text
    due = made.json()["next_at"]
    platform.schedule_loop.cycle(now=due + 1)
    [first] = runs(tc, "etl-nightly")
    assert first["outcome"] == "started" and first["job_id"] is None and first["run_id"].startswith("p-")
    run = tc.get(f"/api/v1/pipelines/{first['run_id']}").json()
    assert run["params"] == {"scheduled_at": datetime.fromtimestamp(due, timezone.utc).isoformat(), "rows": 20}
    assert run["owner"] == "local" and tc.get("/api/v1/schedules/etl-nightly").json()["active"] == [run["id"]]
    # the next fire, its first run still going, cancels it and starts another
    platform.schedule_loop.cycle(now=tc.get("/api/v1/schedules/etl-nightly").json()["next_at"] + 1)
    second = runs(tc, "etl-nightly")[0]
    assert second["outcome"] == "started" and second["message"] == f"replaced {first['run_id']}"
    until(lambda: tc.get(f"/api/v1/pipelines/{first['run_id']}").json()["status"] in ("cancelling", "cancelled"))


def test_a_pipeline_schedule_is_checked_as_a_run_would_be(env):  # noqa: F811
    tc, sdk, engine, platform = env
    for spec, said in [({"pipeline": PIPELINE, "params": {"nope": 1}}, "params.nope"),
                       ({"pipeline": {"steps": {"a": {"command": "true", "needs": ["b"]}}}}, "b"),
                       ({"pipeline": "etl.yaml"}, "pipeline"),
                       ({"pipeline": PIPELINE, "job": {"command": "true"}}, "one of them"),
                       ({"job": {"command": "true"}, "params": {"x": 1}}, "pipeline's")]:
        r = tc.post("/api/v1/schedules", json={"spec": {"name": "n", "cron": YEARLY, **spec}})
        assert r.status_code == 422 and said in r.text, (spec, r.text)
    assert tc.get("/api/v1/schedules").json()["items"] == []


def test_metrics_say_each_schedules_next_and_last_fire_runs_going_and_its_last_outcome(env):  # noqa: F811
    from tests.integration.test_monitoring_api import scrape, series

    tc, sdk, engine, platform = env
    made = create(tc)
    create(tc, name="idle")
    tc.post("/api/v1/schedules/idle/pause")
    platform.schedule_loop.cycle(now=made["next_at"] + 1)
    now = tc.get("/api/v1/schedules/nightly").json()
    s = scrape(tc)

    def one(name, schedule, **labels):
        found = series(s, name, schedule=schedule, **labels)
        return found.popitem()[1] if found else None

    assert one("trainyard_schedule_next_fire_timestamp_seconds", "nightly") == now["next_at"]
    assert one("trainyard_schedule_last_fire_timestamp_seconds", "nightly") == made["next_at"]
    assert one("trainyard_schedule_active_runs", "nightly") == 1
    assert {o: one("trainyard_schedule_last_outcome", "nightly", outcome=o)
            for o in ("started", "skipped", "missed", "failed")} == {"started": 1, "skipped": 0, "missed": 0, "failed": 0}
    assert one("trainyard_schedule_suspended", "idle") == 1 and one("trainyard_schedule_suspended", "nightly") == 0
    assert one("trainyard_schedule_next_fire_timestamp_seconds", "idle") is None  # paused: no next fire
    assert one("trainyard_schedule_last_outcome", "idle", outcome="started") is None  # never fired


def test_a_fire_whose_job_was_deleted_since_keeps_its_id_and_says_it_is_gone(env):  # noqa: F811
    tc, sdk, engine, platform = env
    made = create(tc)
    platform.schedule_loop.cycle(now=made["next_at"] + 1)
    [run] = runs(tc, "nightly")
    assert run["outcome"] == "started" and run["gone"] is False
    attempt = until(lambda: next((a for a in engine.launched if a.startswith(run["job_id"])), None))
    report(tc, engine, attempt, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    until(lambda: sdk.get(run["job_id"]).status.value == "succeeded")
    r = tc.delete(f"/api/v1/jobs/{run['job_id']}")
    assert r.status_code == 204, r.text
    [after] = runs(tc, "nightly")
    assert (after["job_id"], after["gone"]) == (run["job_id"], True)
    assert tc.get("/api/v1/schedules").json()["items"][0]["runs"][0]["gone"] is True
    # the next fire's job is there: only the deleted one is gone
    platform.schedule_loop.cycle(now=tc.get("/api/v1/schedules/nightly").json()["next_at"] + 1)
    newest, oldest = runs(tc, "nightly")
    assert newest["gone"] is False and oldest["gone"] is True
