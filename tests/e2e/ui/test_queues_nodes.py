"""The queues and nodes pages in a real browser against a real server (4 × A100 declared): a job holding
2 GPUs shows against its queue's quota, its team's fair share, and on the GPUs it holds."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import screenshot, signed_in

pytestmark = pytest.mark.slow


def test_a_job_holding_two_gpus_shows_on_its_queue_and_on_the_gpus_it_holds(server, page):
    # given a queue with a quota of 3 A100s, and a job on it holding 2
    api = httpx.Client(base_url=server.url, headers=server.headers, timeout=30)
    r = api.post("/api/v1/queues", json={"queue": {"name": "vision", "team": "cv", "quota": {"gpu": {"A100": 3}}}})
    assert r.status_code == 201, r.text
    api.post("/api/v1/queues", json={"queue": {"name": "speech", "team": "asr", "quota": {"gpu": 1, "cpu": 1}}})
    spec = {"name": "hold", "queue": "vision", "command": "sleep 300", "resources": {"cpu": 0.5, "gpu": 2}}
    r = api.post("/api/v1/jobs", json={"spec": spec})
    assert r.status_code == 201, r.text
    job = r.json()["id"]
    # when the queues page is open, then the bar shows 2 of the 3 A100s, one job running and none waiting
    page.goto(signed_in(server.url, server.token, "/queues"))
    vision = page.locator(".queue[data-queue=vision]")
    expect(vision.locator("[data-resource='gpu:A100'] .amount")).to_have_text("2/3", timeout=60_000)
    expect(vision.locator("[data-resource='gpu:A100'] .bar > span")).to_have_attribute("style", "width:66.66666666666667%")
    expect(vision.locator(".count.running")).to_have_text("1 running")
    expect(vision.locator(".count.waiting")).to_have_text("0 waiting")
    # and the team's standing: cv holds half the A100s, asr nothing, so asr goes first
    expect(vision.locator(".share")).to_contain_text("team cv holds 50.0% of the cluster's gpu:A100")
    expect(page.locator("tr[data-team=asr]")).to_contain_text("#1")
    expect(page.locator("tr[data-team=cv]")).to_contain_text("#2")
    speech = page.locator(".queue[data-queue=speech]")
    expect(speech.locator("[data-resource='gpu:*'] .amount")).to_have_text("0/1")
    screenshot(page, "queues")
    # and the nodes page names the job on each GPU it holds, the other two free
    page.click("#nav a[data-nav=nodes]")
    page.wait_for_url("**/nodes")
    node = page.locator(".node").first
    expect(node.locator(f".gpu[data-job='{job}']")).to_have_count(2, timeout=30_000)
    expect(node.locator(".gpu:not(.held)")).to_have_count(2)
    expect(node.locator("[data-resource=gpu] .amount")).to_have_text("2/4")
    screenshot(page, "nodes")
    node.locator(f".gpu[data-job='{job}'] a").first.click()
    page.wait_for_url(f"**/jobs/{job}")
