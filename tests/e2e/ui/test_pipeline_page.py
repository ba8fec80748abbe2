"""The pipeline pages in a real browser against a real server: a run's DAG shows each step's state as it
runs (a fan-out folded into a counted box that opens into its items), a step opens its job, the runs list
filters by status in the URL."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in, screenshot

pytestmark = pytest.mark.slow

# prepare (quick, writes data) -> train × 10 (read it) (items 0 and 5 sleep: they stay running) -> report (waits)
PIPELINE = """\
name: ui-dag
params: {n: 10}
steps:
  prepare:
    command: python -c "open('{{outputs.data}}', 'w').write('ready')"
    outputs: [data]
    resources: {cpu: 0.1, memory: 64Mi}
  train:
    foreach: "{{params.n}}"
    inputs: {data: "{{steps.prepare.outputs.data}}"}
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
    open_signed_in(page, server.url, server.token, f"/pipelines/{run['id']}")
    # then each step shows its state as text and colour, updating as the run goes on
    prepare = page.locator(".dag-node[data-step=prepare]")
    expect(prepare).to_have_attribute("data-status", "succeeded", timeout=60_000)
    expect(prepare).to_contain_text("succeeded")
    expect(prepare).to_have_class("dag-node st-ok")
    report = page.locator(".dag-node[data-step=report]")
    expect(report).to_have_attribute("data-status", "waiting")
    expect(report).to_contain_text("waiting")
    # its steps' jobs are a label filter away (each is labelled with the run)
    assert page.locator("#step-jobs").get_attribute("href") == \
        f"/jobs?label=trainyard.io%2Fpipeline-run%3D{run['id']}"
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
    # and the artifact prepare wrote has its lineage: made by prepare, read by every train item
    page.locator("table.artifacts tr", has_text="data").get_by_role("button", name="lineage").click()
    lineage = page.locator(".lineage")
    expect(lineage).to_contain_text("Made by step prepare")
    expect(lineage.locator("li", has_text="step train-")).to_have_count(10, timeout=60_000)  # as each is submitted
    assert "artifact=" in page.url
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
    expect(page.locator(".panel", has_text="Why steps did not run")).to_contain_text("report")
    # and retry runs again what did not finish, keeping what succeeded
    page.get_by_role("button", name="Retry").click()
    expect(page.locator(".run-status .badge")).to_have_attribute("data-status", "running", timeout=30_000)
    expect(page.locator(".dag-node[data-step=report]")).to_have_attribute("data-status", "waiting")
    expect(prepare).to_have_attribute("data-status", "succeeded")


def test_the_runs_list_filters_by_status_and_name_in_the_url(server, page):
    quick = start(server, "name: quick\nsteps:\n  one:\n    command: echo one\n    resources: {cpu: 0.1}\n")
    httpx.get(f"{server.url}/api/v1/pipelines/{quick['id']}/wait", params={"timeout": 60}, headers=server.headers,
              timeout=70)
    start(server, "name: slow\nsteps:\n  one:\n    command: sleep 300\n    resources: {cpu: 0.1}\n")
    open_signed_in(page, server.url, server.token, "/pipelines")
    expect(page.locator("tr[data-run]")).to_have_count(2)
    expect(page.locator(f"tr[data-run='{quick['id']}']")).to_contain_text("1/1")
    page.get_by_label("succeeded").check()
    page.wait_for_url("**/pipelines?status=succeeded")
    expect(page.locator("tr[data-run]")).to_have_count(1)
    page.reload()
    expect(page.locator("tr[data-run]")).to_have_count(1)
    expect(page.locator("tr[data-run]")).to_contain_text("quick")
    page.get_by_label("succeeded").uncheck()
    page.wait_for_function("!location.search.includes('status=')")
    page.fill("input[name=name]", "slo")
    page.wait_for_url("**/pipelines?name=slo")
    expect(page.locator("tr[data-run]")).to_have_count(1)
    expect(page.locator("tr[data-run]")).to_contain_text("slow")
    page.locator("tr[data-run] a").first.click()
    page.wait_for_url("**/pipelines/*")
    expect(page.locator(".dag-node[data-step=one]")).to_be_visible()
    expect(page.locator("button[name=delete]")).to_be_disabled()  # the slow run runs
    # an ended run is deleted from its page, which goes back to the list, without it
    open_signed_in(page, server.url, server.token, f"/pipelines/{quick['id']}")
    expect(page.locator(".dag-node[data-step=one]")).to_be_visible()
    page.once("dialog", lambda d: d.accept())
    page.click("button[name=delete]")
    page.wait_for_url("**/pipelines")
    expect(page.locator("tr[data-run]")).to_have_count(1)
    expect(page.locator("tr[data-run]")).to_contain_text("slow")
    assert httpx.get(f"{server.url}/api/v1/pipelines/{quick['id']}", headers=server.headers).status_code == 404


def test_a_fan_out_of_sixty_stays_one_box_until_opened_then_wraps(server, page):
    # given a fan-out of 60 waiting behind a step that runs (no process per item yet)
    run = start(server, """\
name: wide
steps:
  hold:
    command: sleep 300
    resources: {cpu: 0.1}
  train:
    needs: [hold]
    foreach: 60
    command: echo {{item}}
  merge:
    needs: [train]
    command: echo merged
""")
    open_signed_in(page, server.url, server.token, f"/pipelines/{run['id']}")
    group = page.locator(".dag-group[data-step=train]")
    expect(group).to_contain_text("train × 60")
    expect(group).to_contain_text("60 waiting")
    box = group.bounding_box()
    assert box["height"] < 120  # one box, as tall as a step or two
    group.get_by_role("button", name="show 60").click()
    tiles = group.locator(".dag-tile")
    expect(tiles).to_have_count(60)
    # the items wrap in rows of 8: the graph grows down, not off the screen sideways
    first, ninth = tiles.nth(0).bounding_box(), tiles.nth(8).bounding_box()
    assert ninth["x"] == first["x"] and ninth["y"] > first["y"]
    assert group.bounding_box()["width"] < 900
    merge, hold = page.locator(".dag-node[data-step=merge]"), page.locator(".dag-node[data-step=hold]")
    assert hold.bounding_box()["x"] < group.bounding_box()["x"] < merge.bounding_box()["x"]  # layers, left to right
    page.reload()
    expect(page.locator(".dag-group[data-step=train] .dag-tile")).to_have_count(60)  # still open
