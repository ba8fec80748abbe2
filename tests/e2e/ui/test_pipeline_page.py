"""The pipeline pages in a real browser against a real server: a run's DAG shows each step's state as it
runs (a fan-out folded into a counted box that opens into its items), a step opens its job, the runs list
filters by status in the URL."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import screenshot, signed_in

pytestmark = pytest.mark.slow

# prepare (quick) -> train × 10 (items 0 and 5 sleep: they stay running) -> report (waits)
PIPELINE = """\
name: ui-dag
params: {n: 10}
steps:
  prepare:
    command: echo ready
    resources: {cpu: 0.1, memory: 64Mi}
  train:
    needs: [prepare]
    foreach: "{{params.n}}"
    command: python -c "import time; time.sleep(300 if {{item}} % 5 == 0 else 0)"
    resources: {cpu: 0.1, memory: 64Mi}
  report:
    needs: [train]
    command: echo done
    resources: {cpu: 0.1, memory: 64Mi}
"""


def start(server, text: str) -> dict:
    r = httpx.post(server.url + "/api/v1/pipelines", content=text,
                   headers={**server.headers, "Content-Type": "application/yaml"}, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()


def test_the_dag_shows_each_steps_state_live_and_a_step_opens_its_job(server, page):
    # given a run whose first step ends at once, whose fan-out runs, and whose last step waits
    run = start(server, PIPELINE)
    page.goto(signed_in(server.url, server.token, f"/pipelines/{run['id']}"))
    # then each step shows its state as text and colour, updating as the run goes on
    prepare = page.locator(".dag-node[data-step=prepare]")
    expect(prepare).to_have_attribute("data-status", "succeeded", timeout=60_000)
    expect(prepare).to_contain_text("succeeded")
    expect(prepare).to_have_class("dag-node st-ok")
    report = page.locator(".dag-node[data-step=report]")
    expect(report).to_have_attribute("data-status", "waiting")
    expect(report).to_contain_text("waiting")
    # and the fan-out of 10 is one box with its counts until opened
    group = page.locator(".dag-group[data-step=train]")
    expect(group).to_contain_text("train × 10")
    expect(group.locator(".dag-tile")).to_have_count(0)
    group.get_by_role("button", name="show 10").click()
    expect(group.locator(".dag-tile")).to_have_count(10)
    running = group.locator(".dag-tile[data-status=running]")
    expect(running).to_have_count(2, timeout=60_000)
    expect(group.locator(".dag-tile[data-step='train-0']")).to_contain_text("running")
    expect(group).to_contain_text("2 running")
    assert "open=train" in page.url  # the opened fan-out survives a reload
    screenshot(page, "pipeline")
    # when a step is clicked, its job's page opens
    job_id = next(s["job_id"] for s in httpx.get(f"{server.url}/api/v1/pipelines/{run['id']}",
                                                  headers=server.headers).json()["steps"] if s["name"] == "prepare")
    prepare.click()
    page.wait_for_url(f"**/jobs/{job_id}")
    # and back on the run, cancel stops it
    page.go_back()
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator(".run-status .badge")).to_have_attribute("data-status", "cancelled", timeout=60_000)
    expect(page.locator(".dag-node[data-step=report]")).to_have_attribute("data-status", "cancelled")


def test_the_runs_list_filters_by_status_and_name_in_the_url(server, page):
    quick = start(server, "name: quick\nsteps:\n  one:\n    command: echo one\n    resources: {cpu: 0.1}\n")
    httpx.get(f"{server.url}/api/v1/pipelines/{quick['id']}/wait", params={"timeout": 60}, headers=server.headers,
              timeout=70)
    start(server, "name: slow\nsteps:\n  one:\n    command: sleep 300\n    resources: {cpu: 0.1}\n")
    page.goto(signed_in(server.url, server.token, "/pipelines"))
    expect(page.locator("tr[data-run]")).to_have_count(2)
    expect(page.locator(f"tr[data-run='{quick['id']}']")).to_contain_text("1/1")
    page.get_by_label("succeeded").check()
    page.wait_for_url("**/pipelines?status=succeeded")
    expect(page.locator("tr[data-run]")).to_have_count(1)
    page.reload()
    expect(page.locator("tr[data-run]")).to_have_count(1)
    expect(page.locator("tr[data-run]")).to_contain_text("quick")
    page.get_by_label("succeeded").uncheck()
    page.fill("input[name=name]", "slo")
    page.wait_for_url("**/pipelines?name=slo")
    expect(page.locator("tr[data-run]")).to_have_count(1)
    expect(page.locator("tr[data-run]")).to_contain_text("slow")
    page.locator("tr[data-run] a").first.click()
    page.wait_for_url("**/pipelines/*")
    expect(page.locator(".dag-node[data-step=one]")).to_be_visible()
