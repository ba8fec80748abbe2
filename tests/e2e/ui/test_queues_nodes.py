"""The queues and nodes pages in a real browser against a real server (4 × A100 declared): a job holding
2 GPUs shows against its queue's quota, its team's fair share, and on the GPUs it holds (another team's job
there as busy, unnamed); an admin cordons, uncordons and drains a node from its panel, which a member only sees."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import py_job, until
from tests.support.browser import open_signed_in, screenshot
from tests.support.servers import ServerProcess

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
    open_signed_in(page, server.url, server.token, "/queues")
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


def test_an_admin_cordons_uncordons_and_drains_a_node_from_its_panel(server, page):
    # given the nodes page, signed in as the server's local admin (no --auth)
    sdk = server.client()
    name = sdk.nodes()[0].name
    open_signed_in(page, server.url, server.token, "/nodes")
    node = page.locator(f".node[data-node='{name}']")
    expect(node.locator(".badge.state")).to_have_text("ready", timeout=30_000)

    # when they cordon it with a reason, then it shows cordoned, why and who, and the API has it
    page.once("dialog", lambda d: d.accept("swap a DIMM"))
    node.locator("button[name=cordon]").click()
    expect(node.locator(".badge.state")).to_have_text("cordoned")
    expect(node.locator(".cordon .reason")).to_have_text("swap a DIMM")
    expect(node.locator(".cordon")).to_contain_text("by local")
    expect(page.locator("p.muted", has_text="GPUs in use")).to_contain_text("1 node · 1 cordoned · 0/4 GPUs in use")
    assert sdk.node(name).cordon.reason == "swap a DIMM"
    # and a job submitted now waits for it
    waiting = sdk.submit(py_job("print('fresh')", name="fresh"))
    until(lambda: f"cordoned node {name}" in (waiting.refresh().reason or ""), show=lambda: waiting.info.reason)
    assert waiting.refresh().status.value == "pending"

    # when they uncordon it, then it is ready again and the job runs
    node.locator("button[name=uncordon]").click()
    expect(node.locator(".badge.state")).to_have_text("ready")
    expect(node.locator("button[name=uncordon]")).to_have_count(0)
    assert waiting.wait(timeout=60).status.value == "succeeded"

    # when they drain it under a running job, the dialog says what stops, and the job's attempt ends NodeDrained
    running = sdk.submit(py_job("import time; print('up', flush=True); time.sleep(30)", name="long", grace_period=5))
    until(lambda: "up" in running.logs(), timeout=30)
    expect(node).to_have_attribute("data-attempts", "1", timeout=10_000)
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.accept("rack move")))
    node.locator("button[name=drain]").click()
    expect(node.locator(".badge.state")).to_have_text(re.compile(r"^(draining \(1\)|drained)$"))
    assert "It stops the 1 attempt running there" in asked[0]
    expect(node.locator(".cordon .reason")).to_have_text("rack move")
    expect(node.locator("button[name=drain]")).to_have_count(0)
    info = until(lambda: (j := running.refresh()).attempts and j.attempts[0].reason and j, timeout=30,
                 show=lambda: running.info.attempts)
    assert info.attempts[0].reason == "NodeDrained"
    expect(node.locator(".badge.state")).to_have_text("drained", timeout=30_000)
    sdk.cancel(running.id)


def test_a_member_sees_a_cordon_but_no_button_to_change_it(auth_server, page):
    # given a cordoned node, and a member (not an admin) of team vision
    admin = (auth_server.home / "first-admin-token").read_text().strip()
    made = auth_server.cli("admin", "user", "create", "alice", "--team", "vision", "--role", "member",
                           env={"TRAINYARD_TOKEN": admin})
    assert made.returncode == 0, made.stderr
    api = httpx.Client(base_url=auth_server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30)
    name = api.get("/api/v1/nodes").json()[0]["name"]
    assert api.post(f"/api/v1/nodes/{name}/cordon", json={"reason": "kernel update"}).status_code == 200
    # when they open the nodes page, then they see the cordon but no Cordon, Drain or Uncordon
    open_signed_in(page, auth_server.url, made.stdout.strip().splitlines()[-1], "/nodes")
    node = page.locator(f".node[data-node='{name}']")
    expect(node.locator(".badge.state")).to_have_text("cordoned", timeout=30_000)
    expect(node.locator(".cordon")).to_contain_text("kernel update")
    expect(node.locator("button")).to_have_count(0)
    # while the admin has them
    page.goto("about:blank")  # a new page load: the same path with another token in its fragment would not be one
    open_signed_in(page, auth_server.url, admin, "/nodes")
    expect(node.locator("button[name=uncordon]")).to_have_count(1, timeout=30_000)
    expect(node.locator("button[name=drain]")).to_have_count(1)


def test_a_gpu_another_teams_job_holds_shows_busy_without_naming_the_job(tmp_path, page):
    # given a server with users and 2 GPUs, and bob of team nlp running a job on one of them
    srv = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "2", "--memory", "4Gi", "--gpus", "2",
                                            "--gpu-type", "A100"])
    srv.start()
    try:
        admin = (srv.home / "first-admin-token").read_text().strip()
        tokens = {}
        for user, team in (("alice", "vision"), ("bob", "nlp")):
            made = srv.cli("admin", "user", "create", user, "--team", team, "--role", "member",
                           env={"TRAINYARD_TOKEN": admin})
            assert made.returncode == 0, made.stderr
            tokens[user] = made.stdout.strip().splitlines()[-1]
        bob = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {tokens['bob']}"}, timeout=30)
        spec = {"name": "b", "command": "sleep 300", "resources": {"cpu": 0.5, "gpu": 1}}
        r = bob.post("/api/v1/jobs", json={"spec": spec})
        assert r.status_code == 201, r.text
        job = r.json()["id"]
        # when alice of team vision opens the nodes page, then that GPU is busy, with no id and no link
        open_signed_in(page, srv.url, tokens["alice"], "/nodes")
        held = page.locator(".node .gpu.held")
        expect(held).to_have_count(1, timeout=30_000)
        expect(held).to_contain_text("another team's job")
        expect(held.locator("a")).to_have_count(0)
        expect(page.locator(".node .gpu:not(.held)")).to_have_count(1)
        # while bob reads his job there, linked
        page.goto("about:blank")
        open_signed_in(page, srv.url, tokens["bob"], "/nodes")
        expect(page.locator(f".node .gpu[data-job='{job}'] a")).to_have_text(job, timeout=30_000)
        bob.post(f"/api/v1/jobs/{job}/cancel")
    finally:
        srv.stop_all()
