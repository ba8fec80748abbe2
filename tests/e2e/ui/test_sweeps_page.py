"""The sweeps pages in a real browser against a real server: the list with each sweep's status, best value and
trials; one sweep's trials best first, each linked to its job, the best one's params, a link comparing them;
and cancelling a running sweep from its page."""

from __future__ import annotations

import sys
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from tests.support.browser import screenshot, signed_in

pytestmark = pytest.mark.slow

# score = 1 - (x - 0.3)² × (step + 1): the nearer x is to 0.3, the better
TRIAL = ("import time, trainyard\nx = float('{{params.x}}')\n"
         "for step in range({{params.steps}}):\n"
         "    trainyard.log_metrics(step=step, score=1 - (x - 0.3) ** 2 * (step + 1))\n"
         "    time.sleep({{params.pause}})\n")


def grid_sweep(xs: list[float], steps: int, **more: object) -> dict:
    return {"name": "quad", "job": {"command": [sys.executable, "-c", TRIAL], "resources": {"cpu": 0.5}},
            "parameters": {"x": {"values": xs}, "steps": steps, "pause": 0.2},
            "metric": {"name": "score", "goal": "maximize"}, "method": "grid", **more}


def test_the_sweeps_pages_show_the_trials_best_first_with_their_jobs_and_the_best_params(server, page):
    # given a grid sweep whose best trial is its second (x = 0.3 scores 1), then its third (x = 0.1)
    client = server.client()
    sweep = client.sweep(grid_sweep([0.6, 0.3, 0.1], steps=3, parallel=2))

    # when the list is open, then it shows the sweep, and once it is done its best value and trials
    page.goto(signed_in(server.url, server.token, "/sweeps"))
    row = page.locator(f"tr[data-sweep='{sweep.id}']")
    expect(row).to_contain_text("quad")
    expect(row).to_contain_text("score maximize")
    expect(row.locator(".badge")).to_have_text("succeeded", timeout=120_000)
    expect(row.locator(".best")).to_have_text("1 trial 1")
    expect(row.locator(".trials")).to_have_text("3/3")
    expect(page.locator("#nav a[data-nav=sweeps]")).to_have_class("active")
    # and without the ended ones it is gone, with a hint of how to start one
    page.uncheck("input[name=all]")
    page.wait_for_url("**/sweeps?all=0")
    expect(page.locator("table.sweeps tbody")).to_contain_text("trainyard sweep run sweep.yaml")
    expect(row).to_have_count(0)
    page.check("input[name=all]")

    # and its page lists every trial, best first, with its state, value and params
    row.locator("a", has_text="quad").click()
    page.wait_for_url(f"**/sweeps/{sweep.id}")
    expect(page.locator("#nav a[data-nav=sweeps]")).to_have_class("active")
    trials = page.locator("table.trials tbody tr")
    expect(trials).to_have_count(3)
    assert [trials.nth(i).get_attribute("data-trial") for i in range(3)] == ["1", "2", "0"]
    assert [trials.nth(i).get_attribute("data-state") for i in range(3)] == ["complete"] * 3
    expect(trials.first).to_have_class("best")
    expect(trials.nth(1).locator(".value")).to_have_text("0.88")
    expect(page.locator("table.trials td.param[data-param=x]")).to_have_text(["0.3", "0.1", "0.6"])
    expect(page.locator(".best-value")).to_have_text("1")
    expect(page.locator(".best-params")).to_have_text("x=0.3")
    expect(page.locator("button[name=cancel]")).to_be_disabled()
    # the compare link names every trial's job, best first
    jobs = {t.number: t.job_id for t in client.sweeps.get(sweep.id).trials}
    href = page.locator("#compare-trials").get_attribute("href")
    assert parse_qs(urlparse(href).query)["jobs"] == [",".join(jobs[n] for n in (1, 2, 0))]
    screenshot(page, "sweep")

    # and a trial's job is one click away
    trials.first.locator(f"a[href='/jobs/{jobs[1]}']").click()
    page.wait_for_url(f"**/jobs/{jobs[1]}")
    expect(page.locator("h1")).to_contain_text("quad-1")


def test_a_running_sweep_is_cancelled_from_its_page(server, page):
    # given a sweep whose first trial runs for a while
    client = server.client()
    sweep = client.sweep(grid_sweep([0.1, 0.2, 0.3], steps=200, parallel=1))
    page.goto(signed_in(server.url, server.token, f"/sweeps/{sweep.id}"))
    expect(page.locator("table.trials tr[data-state=running]")).to_have_count(1, timeout=60_000)
    expect(page.locator(".sweep-status .badge")).to_have_text("running")

    # when Cancel is clicked and confirmed
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    page.click("button[name=cancel]")

    # then the sweep is cancelled, with its running trial, and says so
    expect(page.locator(".sweep-status .badge")).to_have_text("cancelled", timeout=30_000)
    expect(page.locator("table.trials tr[data-state=running]")).to_have_count(0)
    # the loop may have been submitting the next trial as the cancel came: it is stopped with the first
    rows = page.locator("table.trials tbody tr").count()
    assert 1 <= rows <= 2 and page.locator("table.trials tbody tr[data-state=cancelled]").count() == rows
    expect(page.locator("button[name=cancel]")).to_be_disabled()
    assert "quad" in asked[0]
    assert client.sweeps.get(sweep.id).status.value == "cancelled"
