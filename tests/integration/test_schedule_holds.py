"""What a schedule's loop must not do, through the API with a fake engine, the loop's clock given by the test:
fire a schedule stored with a cron a submit is refused now, or stop runs for a fire it did not make."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from tests.integration.test_api import env  # noqa: F401  (the fixture)
from tests.integration.test_schedule_cli import cli  # noqa: F401  (the fixture)

from trainyard.spec.schedule import ScheduleSpec
from trainyard.spec.submitted import STORED

FAR = datetime(2031, 1, 1, tzinfo=timezone.utc).timestamp()  # the server's own loop never reaches it in a test


def stored(platform, name: str, cron: str, next_at: float) -> str:
    """A schedule written to the store as one made before its cron was refused at submit."""
    spec = ScheduleSpec.model_validate({"name": name, "cron": cron, "job": {"command": "true"}}, context=STORED)
    return platform.schedules.schedules.create(spec, None, "local", None, next_at)


def test_a_stored_six_field_cron_is_held_paused_with_its_reason_and_never_fires(env, caplog):  # noqa: F811
    tc, sdk, engine, platform = env
    # given a schedule stored with six fields (every second, as cronsim reads them), due now
    sid = stored(platform, "tick", "* * * * * *", FAR)
    # then it is shown paused, saying why, before the loop reaches it
    shown = tc.get("/api/v1/schedules/tick").json()
    assert shown["suspended"] is True and shown["next_at"] is None
    assert "has 6 fields; a cron has five" in shown["held"], shown
    # when the loop looks at it, again and again
    with caplog.at_level(logging.WARNING, logger="trainyard.schedules"):
        for dt in (1, 2, 3):
            platform.schedule_loop.cycle(now=FAR + dt)
    # then nothing was fired nor recorded, it was said once, and it is paused in the store too
    assert tc.get("/api/v1/schedules/tick").json()["runs"] == [] and sdk.jobs(limit=10).items == []
    assert [r.getMessage() for r in caplog.records if "held paused" in r.getMessage()] == [
        f"schedule {sid} (tick) is held paused, not fired: {shown['held']}"]
    assert platform.schedules.schedules.find(sid)["suspended"] is True
    [listed] = tc.get("/api/v1/schedules").json()["items"]
    assert (listed["suspended"], listed["next_at"], listed["held"]) == (True, None, shown["held"])
    # and neither a resume nor a trigger fires it: each names the cron
    for verb in ("resume", "trigger"):
        r = tc.post(f"/api/v1/schedules/tick/{verb}")
        assert r.status_code == 409 and r.json()["details"]["field"] == "cron", r.text
        assert "has 6 fields" in r.json()["message"]
    assert sdk.jobs(limit=10).items == []
    # made again with five fields, it fires
    assert tc.delete("/api/v1/schedules/tick").status_code == 204
    made = tc.post("/api/v1/schedules", json={"spec": {"name": "tick", "cron": "0 0 1 1 *",
                                                       "job": {"command": "true"}}}).json()
    assert made["held"] is None and made["suspended"] is False
    platform.schedule_loop.cycle(now=made["next_at"] + 1)
    assert tc.get("/api/v1/schedules/tick").json()["runs"][0]["outcome"] == "started"


def test_schedule_show_and_ls_say_it_is_held_and_why_and_resume_names_the_cron(env, cli):  # noqa: F811
    tc, sdk, engine, platform = env
    stored(platform, "tick", "*/2 * * * * *", FAR)
    code, shown = cli("show", "tick")
    assert code == 0 and "next: paused" in shown, shown
    assert "held paused: cron: '*/2 * * * * *' has 6 fields; a cron has five" in shown, shown
    code, listed = cli("ls")
    assert code == 0 and "tick" in listed and "paused" in listed, listed
    code, said = cli("resume", "tick")
    assert code != 0 and "cron" in said and "has 6 fields" in said, said


def test_replace_stops_the_runs_going_only_for_a_fire_this_server_claimed(env):  # noqa: F811
    tc, sdk, engine, platform = env
    # given a replacing schedule whose first fire's job still runs
    made = tc.post("/api/v1/schedules", json={"spec": {"name": "nightly", "cron": "0 0 1 1 *",
                                                       "concurrency": "replace", "job": {"command": "true"}}}).json()
    platform.schedule_loop.cycle(now=made["next_at"] + 1)
    first = tc.get("/api/v1/schedules/nightly").json()["runs"][0]["job_id"]
    # when the loop has read its next fire as due, but a pause comes before its claim
    due_at = tc.get("/api/v1/schedules/nightly").json()["next_at"]
    [row] = [r for r in platform.schedules.schedules.due(due_at + 1) if r["name"] == "nightly"]
    assert tc.post("/api/v1/schedules/nightly/pause").json()["suspended"] is True
    # then the fire is not made, and the job it would have replaced goes on
    assert platform.schedule_loop.due(row, due_at + 1) is None
    assert sdk.get(first).status.value in ("pending", "starting", "running")
    assert [r["job_id"] for r in tc.get("/api/v1/schedules/nightly").json()["runs"]] == [first]
    # and once resumed, the fire it claims replaces it, the cancel saying why
    tc.post("/api/v1/schedules/nightly/resume")
    platform.schedule_loop.cycle(now=tc.get("/api/v1/schedules/nightly").json()["next_at"] + 1)
    fire = tc.get("/api/v1/schedules/nightly").json()["runs"][0]
    assert fire["outcome"] == "started" and fire["message"] == f"replaced {first}"
    stopped = sdk.get(first)
    assert stopped.status.value in ("cancelling", "cancelled"), stopped
    assert stopped.reason == "replaced by a fire of schedule nightly"


def test_metrics_count_a_held_schedule_as_paused_before_the_loop_reaches_it(env):  # noqa: F811
    from tests.integration.test_monitoring_api import scrape, series

    tc, sdk, engine, platform = env
    # given a schedule stored with six fields, not yet due, and one with five
    stored(platform, "tick", "* * * * * *", FAR)
    stored(platform, "yearly", "0 0 1 1 *", FAR)
    # when /metrics is scraped before the loop has paused it in the store
    s = scrape(tc)
    # then it reads as the API shows it: paused, with no next fire; the five-field one does not
    shown = tc.get("/api/v1/schedules/tick").json()
    assert (shown["suspended"], shown["next_at"]) == (True, None)
    assert [*series(s, "trainyard_schedule_suspended", schedule="tick").values()] == [1.0]
    assert series(s, "trainyard_schedule_next_fire_timestamp_seconds", schedule="tick") == {}
    assert [*series(s, "trainyard_schedule_suspended", schedule="yearly").values()] == [0.0]
    assert [*series(s, "trainyard_schedule_next_fire_timestamp_seconds", schedule="yearly").values()] == [FAR]
