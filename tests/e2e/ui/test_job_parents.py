"""A job that a pipeline run or a sweep started links back to it from its page, so a person who came to the job
from a list (or a link, a notification) finds the run or sweep it belongs to without the back button; and a run's
failed step links to its job, whose log says why."""

from __future__ import annotations

import sys

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in
from tests.support.waiting import until

pytestmark = pytest.mark.slow

PIPELINE = """\
name: parents
steps:
  prepare:
    command: echo ready
    resources: {cpu: 0.1, memory: 64Mi}
"""


def test_a_steps_job_links_to_its_pipeline_run_and_a_trials_job_to_its_sweep(server, page):
    r = httpx.post(server.url + "/api/v1/pipelines", content=PIPELINE,
                   headers={**server.headers, "Content-Type": "application/yaml"}, timeout=30)
    assert r.status_code == 201, r.text
    run = r.json()["id"]
    client = server.client()
    step_job = until(lambda: next((j.id for j in client.jobs(labels=f"trainyard.io/pipeline-run={run}").items), None))
    sweep = client.sweep({"name": "quad", "job": {"command": [sys.executable, "-c", "pass"], "resources": {"cpu": 0.5}},
                          "parameters": {"x": {"values": [1, 2]}}, "metric": {"name": "score", "goal": "maximize"},
                          "method": "grid"})
    trial_job = until(lambda: next((j.id for j in client.jobs(labels=f"trainyard.io/sweep={sweep.id}").items), None))

    open_signed_in(page, server.url, server.token, f"/jobs/{step_job}")
    part = page.locator(".facts .part-of")
    expect(part).to_have_text(f"pipeline run {run}, step prepare")
    part.locator("a").click()
    page.wait_for_url(f"**/pipelines/{run}")
    expect(page.locator(".dag-node[data-step=prepare]")).to_be_visible()

    page.goto(f"{server.url}/jobs/{trial_job}")
    expect(part).to_contain_text(f"sweep {sweep.id}, trial ")
    part.locator("a").click()
    page.wait_for_url(f"**/sweeps/{sweep.id}")


FAILING = """\
name: breaks
steps:
  load:
    command: python -c "import sys; print('no data here'); sys.exit(3)"
    resources: {cpu: 0.1, memory: 64Mi}
  train:
    needs: [load]
    command: echo never
    resources: {cpu: 0.1, memory: 64Mi}
"""


def test_a_failed_step_links_from_why_steps_did_not_run_to_its_job(server, page):
    r = httpx.post(server.url + "/api/v1/pipelines", content=FAILING,
                   headers={**server.headers, "Content-Type": "application/yaml"}, timeout=30)
    assert r.status_code == 201, r.text
    open_signed_in(page, server.url, server.token, f"/pipelines/{r.json()['id']}")
    why = page.locator("li[data-step=load]")
    expect(why).to_contain_text("failed", timeout=60_000)
    expect(page.locator("li[data-step=train] a")).to_have_count(0)  # skipped: no job to show
    why.locator("a", has_text="load").click()
    page.wait_for_url("**/jobs/j-*")
    expect(page.locator(".log-line", has_text="no data here")).to_be_visible(timeout=30_000)
