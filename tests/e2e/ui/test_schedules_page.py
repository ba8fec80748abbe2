"""The schedules pages in a real browser against a real server: the list with each schedule's cron in words, its
zone and next fire; Run now starting a job (and saying why none started while the last still runs); Pause turning
the next fire into "paused" and Resume bringing it back, as the server has it; Delete only once confirmed; one
schedule's page with its spec and its runs, newest first; the server's message when it refuses."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in, screenshot

pytestmark = pytest.mark.slow
FAR = "0 0 1 1 *"  # midnight on January 1st: nothing fires by itself during a test
LOCAL_TIME = "t => new Date(t * 1000).toLocaleString()"  # the browser's local time, as the page shows times


def create(server, name: str, command: str, **more: object) -> dict:  # noqa: ANN001
    # schedules are made from the CLI or SDK, not the page: the API they use, directly
    body = {"spec": {"name": name, "cron": FAR, "job": {"command": command, "resources": {"cpu": 0.5}}, **more}}
    made = httpx.post(server.url + "/api/v1/schedules", json=body, headers=server.headers, timeout=30)
    assert made.status_code == 201, made.text
    return made.json()


def fetch(server, key: str) -> httpx.Response:  # noqa: ANN001
    return httpx.get(f"{server.url}/api/v1/schedules/{key}", headers=server.headers, timeout=30)


def test_schedules_are_listed_run_now_paused_resumed_deleted_and_shown_with_their_runs(server, page):
    # given two schedules far from their next fire: one whose job runs for a while, one in another zone
    nightly = create(server, "nightly", "sleep 300")
    paris = create(server, "paris-eval", "true", timezone="Europe/Paris")

    # when the list is open, then it shows both, each cron in words, its zone and next fire in local time
    open_signed_in(page, server.url, server.token, "/schedules")
    expect(page.locator("#nav a[data-nav=schedules]")).to_have_class("active")
    expect(page.locator(".hint")).to_contain_text('trainyard schedule create job.yaml --cron "0 3 * * *"')
    rows = page.locator("table.schedules tbody tr")
    expect(rows).to_have_count(2)
    assert [rows.nth(i).get_attribute("data-name") for i in range(2)] == ["paris-eval", "nightly"]  # newest first
    row = page.locator(f"tr[data-schedule='{nightly['id']}']")
    other = page.locator(f"tr[data-schedule='{paris['id']}']")
    for r, s, tz in ((row, nightly, "UTC"), (other, paris, "Europe/Paris")):
        expect(r.locator("td.cron code")).to_have_text(FAR)
        expect(r.locator("td.cron .explain")).to_have_text("At 00:00 on January 1")
        expect(r).to_contain_text(tz)
        expect(r.locator("td.next")).to_have_text(page.evaluate(LOCAL_TIME, s["next_at"]))
        expect(r.locator("td.last")).to_have_text("not fired yet")
        expect(r.locator("td.active")).to_have_text("0")
    assert nightly["next_at"] != paris["next_at"]  # midnight in Paris is not midnight UTC

    # when Run now is clicked, then the job it started is linked, and it is the row's last run and active
    row.locator("button[name=trigger]").click()
    started = page.locator(".schedule-said .ok a")
    expect(started).to_have_attribute("href", re.compile(r"^/jobs/.+"))
    job_id = started.inner_text()
    expect(page.locator(".schedule-said")).to_contain_text(f"nightly: started job {job_id}")
    expect(row.locator("td.last [data-outcome]")).to_have_text("started")
    expect(row.locator(f"td.last a[href='/jobs/{job_id}']")).to_have_text(job_id)
    expect(row.locator("td.active")).to_have_text("1")
    runs = fetch(server, nightly["id"]).json()["runs"]
    assert [(r["outcome"], r["job_id"], r["manual"]) for r in runs] == [("started", job_id, True)]
    screenshot(page, "schedules")

    # when it is run again while that job runs, then the page says why none started
    row.locator("button[name=trigger]").click()
    expect(page.locator(".schedule-said .warn")).to_have_text(
        f"nightly: no job started, skipped: {job_id} still running (concurrency: forbid)")
    expect(row.locator("td.last [data-outcome]")).to_have_text("skipped")
    expect(row.locator("td.active")).to_have_text("1")

    # when the other one's job has run and been deleted since, then its last run names the job without a link
    other.locator("button[name=trigger]").click()
    gone = page.locator(".schedule-said .ok a").inner_text()
    assert server.client().wait(gone, timeout=60).status.value == "succeeded"
    server.client().delete(gone)
    page.reload()
    expect(other.locator("td.last")).to_contain_text(f"{gone} (deleted)")
    expect(other.locator("td.last a")).to_have_count(0)

    # when it is paused, then its next fire reads "paused", and the server agrees; resumed, it is back
    row.locator("button[name=pause]").click()
    expect(row.locator("td.next")).to_have_text("paused")
    expect(row).to_have_attribute("data-state", "paused")
    paused = fetch(server, nightly["id"]).json()
    assert paused["suspended"] is True and paused["next_at"] is None
    expect(other.locator("td.next")).not_to_have_text("paused")  # the other one fires still
    row.locator("button[name=resume]").click()
    expect(row.locator("td.next")).to_have_text(page.evaluate(LOCAL_TIME, nightly["next_at"]))
    expect(row.locator("button[name=pause]")).to_be_visible()
    assert fetch(server, nightly["id"]).json()["suspended"] is False

    # when the other one's Delete is dismissed, then it stays; confirmed, it is gone, here and on the server
    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    other.locator("button[name=delete]").click()
    expect(page.locator(".schedule-said")).to_contain_text("nightly resumed")  # what the last click said, still
    expect(other).to_have_count(1)
    assert fetch(server, paris["id"]).status_code == 200
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    other.locator("button[name=delete]").click()
    expect(other).to_have_count(0)
    expect(page.locator(".schedule-said .ok")).to_have_text("✓ schedule paris-eval deleted")
    assert all("paris-eval" in a for a in asked) and len(asked) == 2
    assert fetch(server, paris["id"]).status_code == 404

    # when its name is clicked, then its page shows the spec and both runs, newest first
    row.locator("a", has_text="nightly").click()
    page.wait_for_url(f"**/schedules/{nightly['id']}")
    expect(page.locator("#nav a[data-nav=schedules]")).to_have_class("active")
    expect(page.locator("h1")).to_have_text("nightly")
    fact = lambda key: page.locator(f"dd[data-key='{key}']")  # noqa: E731
    expect(fact("cron")).to_have_text(f"{FAR} At 00:00 on January 1")
    expect(fact("timezone")).to_have_text("UTC")
    expect(fact("concurrency")).to_have_text("forbid")
    expect(fact("starting deadline")).to_have_text("1h 0m")
    expect(fact("command")).to_have_text("sleep 300")
    expect(fact("queue")).to_have_text("default")
    expect(fact("resources")).to_have_text("0.5 cpu")
    expect(fact("active").locator("a")).to_have_text([job_id])
    runs = page.locator("table.runs tbody tr")
    expect(runs).to_have_count(2)
    assert [runs.nth(i).get_attribute("data-outcome") for i in range(2)] == ["skipped", "started"]
    expect(runs.nth(0).locator("td.reason")).to_contain_text("still running (concurrency: forbid)")
    expect(runs.nth(0).locator("td.mono")).to_have_text("–")
    expect(runs.locator(".manual")).to_have_count(2)
    first = fetch(server, nightly["id"]).json()["runs"][1]
    expect(runs.nth(1).locator("td.due")).to_have_text(page.evaluate(LOCAL_TIME, first["at"]))
    expect(runs.nth(1).locator("td.fired")).to_have_text(page.evaluate(LOCAL_TIME, first["fired_at"]))

    # when it is deleted elsewhere meanwhile, then a click here shows the server's refusal
    assert httpx.delete(f"{server.url}/api/v1/schedules/{nightly['id']}", headers=server.headers).status_code == 204
    page.click("button[name=pause]")
    expect(page.locator(".schedule-said .error")).to_contain_text(f"no such schedule: {nightly['id']}")

    # and its run's job is one click away
    runs.nth(1).locator(f"a[href='/jobs/{job_id}']").click()
    page.wait_for_url(f"**/jobs/{job_id}")


def test_a_schedule_is_opened_by_name_and_deleted_from_its_page_and_one_not_there_says_so(server, page):
    # given no schedule of that name, then its page says so, without an empty spec under it
    open_signed_in(page, server.url, server.token, "/schedules/weekly")
    expect(page.locator("p.error")).to_have_text("No schedule weekly")
    expect(page.locator("h2", has_text="Runs")).to_be_hidden()
    expect(page.locator("#nav a[data-nav=schedules]")).to_have_class("active")

    # given one of that name, when its page is open by name, then it shows; deleted from there, the list is back
    weekly = create(server, "weekly", "true", suspend=True)
    page.goto("about:blank")
    open_signed_in(page, server.url, server.token, "/schedules/weekly")
    expect(page.locator("dd[data-key=id]")).to_have_text(weekly["id"])
    expect(page.locator("dd[data-key='next fire']")).to_have_text("paused")
    expect(page.locator("button[name=resume]")).to_be_visible()
    expect(page.locator("table.runs")).to_have_count(0)
    expect(page.locator("p.muted", has_text="It has not fired yet.")).to_be_visible()
    page.once("dialog", lambda d: d.accept())
    page.click("button[name=delete]")
    page.wait_for_url("**/schedules")
    expect(page.locator("table.schedules tbody")).to_have_text("No schedule is set up.")
    expect(page.locator(".toast.info")).to_have_text("Deleted schedule weekly")
    assert fetch(server, weekly["id"]).status_code == 404


def test_a_pipeline_schedule_shows_its_steps_and_run_now_links_the_pipeline_run(server, page):
    pipeline = {"name": "etl", "params": {"rows": 1},
                "steps": {"extract": {"command": "true"}, "load": {"command": "true", "needs": ["extract"]}}}
    body = {"spec": {"name": "etl-nightly", "cron": FAR, "pipeline": pipeline, "params": {"rows": 5}}}
    made = httpx.post(server.url + "/api/v1/schedules", json=body, headers=server.headers, timeout=30)
    assert made.status_code == 201, made.text
    open_signed_in(page, server.url, server.token, "/schedules")
    row = page.locator(f"tr[data-schedule='{made.json()['id']}']")
    row.get_by_role("button", name="Run now").click()
    link = page.locator(".schedule-said a")
    expect(link).to_have_attribute("href", re.compile(r"^/pipelines/p-[0-9a-f]+$"))
    run_id = link.inner_text()
    assert fetch(server, "etl-nightly").json()["runs"][0]["run_id"] == run_id
    open_signed_in(page, server.url, server.token, "/schedules/etl-nightly")
    expect(page.locator("main")).to_contain_text("etl: extract, load")
    expect(page.locator(f"a[href='/pipelines/{run_id}']").first).to_be_visible()
