"""The sweeps pages in a real browser against a real server: the list with each sweep's status, best value and
trials; one sweep's optimization history chart, its trials best first, each linked to its job, the best one's
params, a link comparing them; and cancelling a running sweep from its page, then deleting it."""

from __future__ import annotations

import json
import re
import sys
from itertools import accumulate
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in, screenshot
from tests.support.waiting import until
from trainyard.errors import SweepNotFound

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
    open_signed_in(page, server.url, server.token, "/sweeps")
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
    # and how to serve or fetch its model, the sweep's id standing for its best trial
    expect(page.locator(".best-model")).to_have_text(
        f"trainyard serve {sweep.id} --name NAME or trainyard download {sweep.id}")
    expect(page.locator("button[name=cancel]")).to_be_disabled()
    # the compare link names every trial's job, best first
    done = client.sweeps.get(sweep.id).trials
    jobs = {t.number: t.job_id for t in done}
    href = page.locator("#compare-trials").get_attribute("href")
    assert parse_qs(urlparse(href).query)["jobs"] == [",".join(jobs[n] for n in (1, 2, 0))]
    # above the best trial, the optimization history: each trial's value by number, and the best so far
    chart = page.locator(".sweep-history")
    expect(chart.locator(".u-legend .u-label")).to_have_text(["trial", "best so far", "score"])
    expect(chart.locator(".uplot")).to_have_count(1)
    points = [[t.number, t.value] for t in sorted(done, key=lambda t: t.number)]
    best = accumulate((v for _, v in points), max)
    assert json.loads(chart.get_attribute("data-points")) == points
    assert json.loads(chart.get_attribute("data-best")) == [[n, b] for (n, _), b in zip(points, best)]
    assert json.loads(chart.get_attribute("data-best"))[1:] == [[1, 1], [2, 1]]  # trial 1 scored 1, the most
    screenshot(page, "sweep")

    # and a trial's job is one click away
    trials.first.locator(f"a[href='/jobs/{jobs[1]}']").click()
    page.wait_for_url(f"**/jobs/{jobs[1]}")
    expect(page.locator("h1")).to_contain_text("quad-1")
    # and all of them, by their sweep's label, in the jobs list
    page.go_back()
    page.click("#trial-jobs")
    page.wait_for_url("**/jobs?label=*")
    expect(page.locator("input[name=label]")).to_have_value(f"trainyard.io/sweep={sweep.id}")
    expect(page.locator("tbody tr[data-id]")).to_have_count(3)
    assert sorted(page.locator("tbody tr[data-id]").evaluate_all("rs => rs.map(r => r.dataset.id)")) == \
        sorted(jobs.values())


def test_a_running_sweep_is_cancelled_from_its_page(server, page):
    # given a sweep whose first trial runs for a while
    client = server.client()
    sweep = client.sweep(grid_sweep([0.1, 0.2, 0.3], steps=200, parallel=1))
    open_signed_in(page, server.url, server.token, f"/sweeps/{sweep.id}")
    expect(page.locator("table.trials tr[data-state=running]")).to_have_count(1, timeout=60_000)
    expect(page.locator(".sweep-status .badge")).to_have_text("running")
    expect(page.locator(".sweep-history")).to_be_hidden()  # no trial has completed: no history to chart

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
    # once its trials' jobs have ended, it is deleted from its page, which goes back to the list
    jobs = [t.job_id for t in client.sweeps.get(sweep.id).trials]
    until(lambda: all(client.get(j).status.value == "cancelled" for j in jobs), timeout=30)
    page.once("dialog", lambda d: d.accept())
    page.click("button[name=delete]")
    expect(page).to_have_url(re.compile(r"/sweeps$"), timeout=10_000)
    with pytest.raises(SweepNotFound):
        client.sweeps.get(sweep.id)


HISTORY = """async ([trials, goal, more]) => {
  const m = await import('/ui/pages/sweep_chart.js');
  const chart = new m.HistoryChart();
  document.body.append(chart.el);
  const metric = {name: 'loss', goal};
  await chart.update(trials, metric);
  const first = chart.el.querySelector('.uplot');
  await chart.update([...trials], metric);
  await chart.update([...trials, ...more], metric);
  const labels = [...chart.el.querySelectorAll('.u-legend .u-label')].map((e) => e.textContent);
  const kept = chart.el.querySelector('.uplot') === first && chart.el.querySelectorAll('.uplot').length === 1;
  chart.destroy();
  return {data: m.history(trials, goal), labels, kept, best: JSON.parse(chart.el.dataset.best)};
}"""


def test_the_optimization_history_charts_completed_values_the_best_so_far_and_pruned_ones_apart(server, page):
    # given trials out of order, in every state, some without a value
    trials = [{"number": 3, "state": "complete", "value": 0.5}, {"number": 0, "state": "complete", "value": 0.9},
              {"number": 1, "state": "pruned", "value": 2.0}, {"number": 2, "state": "failed", "value": 0.1},
              {"number": 4, "state": "running", "value": 0.05}, {"number": 5, "state": "complete", "value": 0.7},
              {"number": 6, "state": "pruned", "value": None}, {"number": 7, "state": "cancelled", "value": None}]
    more = [{"number": 8, "state": "complete", "value": 0.2}]
    open_signed_in(page, server.url, server.token, "/sweeps")

    # when a sweep's history is charted for either goal, then a later trial completing
    minimize = page.evaluate(HISTORY, [trials, "minimize", more])
    maximize = page.evaluate(HISTORY, [trials, "maximize", more])

    # then only completed trials are points, the best so far follows the goal, and pruned ones stand apart
    assert minimize["data"] == {"points": [[0, 0.9], [3, 0.5], [5, 0.7]], "best": [[0, 0.9], [3, 0.5], [5, 0.5]],
                                "pruned": [[1, 2.0]]}
    assert maximize["data"]["best"] == [[0, 0.9], [3, 0.9], [5, 0.9]]
    assert minimize["labels"] == ["trial", "best so far", "loss", "pruned"]
    # and the new trial is drawn on the same chart, not a new one
    assert minimize["kept"] and maximize["kept"]
    assert minimize["best"][-1] == [8, 0.2] and maximize["best"][-1] == [8, 0.9]
