"""What a person's role or not owning a thing forbids is disabled in the UI, its title saying why, where a click
used to be refused by the server (403): a viewer's Cancel on a job page, a member's on a teammate's job, the
jobs list's bulk actions, a pipeline run's, a schedule's and a service's buttons. The server still refuses."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import PY
from tests.support.browser import open_signed_in
from tests.support.servers import ServerProcess
from trainyard.sdk.client import Client

pytestmark = pytest.mark.slow
APP = str(Path(__file__).resolve().parents[2] / "support" / "replica_app.py")  # a service's replica, as a server


def users(srv: ServerProcess, **roles: str) -> dict[str, str]:
    """A token for each user NAME=ROLE made in team vision, by the first admin."""
    admin = (srv.home / "first-admin-token").read_text().strip()
    tokens = {}
    for name, role in roles.items():
        made = srv.cli("admin", "user", "create", name, "--team", "vision", "--role", role,
                       env={"TRAINYARD_TOKEN": admin})
        assert made.returncode == 0, made.stderr
        tokens[name] = made.stdout.strip().splitlines()[-1]
    return tokens


def as_user(page, srv: ServerProcess, token: str, path: str) -> None:  # noqa: ANN001
    page.goto("about:blank")  # a new page load: the same path with another token in its fragment would not be one
    open_signed_in(page, srv.url, token, path)


def forbidden(button, why: str) -> None:  # noqa: ANN001
    expect(button).to_be_disabled()
    expect(button).to_have_attribute("title", why)


def test_a_viewer_and_a_teammate_see_a_jobs_actions_disabled_saying_why_and_its_owner_does_not(auth_server, page):
    # given bob's running job in team vision, and vic (a viewer) and mia (a member) of that team
    tokens = users(auth_server, bob="member", vic="viewer", mia="member")
    bob = httpx.Client(base_url=auth_server.url, headers={"Authorization": f"Bearer {tokens['bob']}"}, timeout=30)
    r = bob.post("/api/v1/jobs", json={"spec": {"name": "long", "command": "sleep 300", "resources": {"cpu": 0.5}}})
    assert r.status_code == 201, r.text
    job = r.json()["id"]
    actions = page.locator(".actions")

    # when the viewer opens it, then every change is disabled, saying why
    as_user(page, auth_server, tokens["vic"], f"/jobs/{job}")
    expect(page.locator("h1 [data-status=running]")).to_be_visible(timeout=30_000)
    forbidden(actions.locator("button[name=cancel]"), "viewers cannot cancel jobs")
    forbidden(actions.locator("button[name=delete]"), "viewers cannot delete jobs")
    forbidden(actions.locator("button[name=edit-labels]"), "viewers cannot change the labels of jobs")
    forbidden(actions.locator("button[name=stacks]"), "viewers cannot dump the stacks of jobs")
    forbidden(actions.locator("button[name=resubmit]"), "viewers cannot submit jobs")
    forbidden(actions.locator("button[name=resubmit-params]"), "viewers cannot submit jobs")
    expect(page.locator(".forbidden")).to_have_text("viewers cannot run commands in jobs")
    expect(page.locator("input[name=command]")).to_have_count(0)
    # and the server still refuses it
    vic = httpx.Client(base_url=auth_server.url, headers={"Authorization": f"Bearer {tokens['vic']}"}, timeout=30)
    assert vic.post(f"/api/v1/jobs/{job}/cancel").status_code == 403

    # and in the jobs list, ticking it disables Cancel selected, naming it
    as_user(page, auth_server, tokens["vic"], "/jobs")
    page.check(f"tr[data-id={job}] input[type=checkbox]")
    forbidden(page.locator("#cancel-selected"), f"{job}: viewers cannot cancel jobs")
    forbidden(page.locator("#delete-selected"), f"{job}: viewers cannot delete jobs")

    # a member of the team may copy it but not cancel a teammate's job
    as_user(page, auth_server, tokens["mia"], f"/jobs/{job}")
    mine_not = "members cancel only their own jobs; this one is bob's (a maintainer of vision may)"
    forbidden(actions.locator("button[name=cancel]"), mine_not)
    expect(actions.locator("button[name=resubmit]")).to_be_enabled()

    # while its owner cancels it from the page
    as_user(page, auth_server, tokens["bob"], f"/jobs/{job}")
    cancel = actions.locator("button[name=cancel]")
    expect(cancel).to_be_enabled()
    assert cancel.get_attribute("title") is None
    page.once("dialog", lambda d: d.accept())
    cancel.click()
    expect(page.locator("h1 .badge")).to_have_text(["cancelled"], timeout=30_000)
    expect(actions.locator("button[name=delete]")).to_be_enabled()


PIPELINE = """\
name: two
steps:
  wait:
    command: sleep 300
    resources: {cpu: 0.1, memory: 64Mi}
"""


def test_a_viewer_sees_a_runs_a_schedules_and_a_services_changes_disabled_saying_why(auth_server, page):
    # given bob's running pipeline run, schedule and service in team vision, and vic, a viewer of it
    tokens = users(auth_server, bob="member", vic="viewer")
    headers = {"Authorization": f"Bearer {tokens['bob']}"}
    bob = httpx.Client(base_url=auth_server.url, headers=headers, timeout=30)
    r = bob.post("/api/v1/pipelines", content=PIPELINE, headers={"Content-Type": "application/yaml"})
    assert r.status_code == 201, r.text
    run = r.json()["id"]
    sched = {"spec": {"name": "nightly", "cron": "0 0 1 1 *", "job": {"command": "true", "resources": {"cpu": 0.1}}}}
    r = bob.post("/api/v1/schedules", json=sched)
    assert r.status_code == 201, r.text
    Client(auth_server.url, token=tokens["bob"]).services.apply(
        {"name": "web", "command": [PY, APP], "resources": {"cpu": 0.2},
         "service": {"replicas": 1, "readiness": {"path": "/healthz", "period": "0.2s"}}})

    # when the viewer opens each, then its changes are disabled, saying why
    as_user(page, auth_server, tokens["vic"], f"/pipelines/{run}")
    expect(page.locator(".run-status .badge")).to_have_text("running", timeout=30_000)
    for verb in ("retry", "cancel", "delete"):
        forbidden(page.locator(f"button[name={verb}]"), f"viewers cannot {verb} pipeline runs")
    as_user(page, auth_server, tokens["vic"], "/schedules")
    row = page.locator("tr[data-name=nightly]")
    forbidden(row.locator("button[name=pause]"), "viewers cannot pause schedules")
    forbidden(row.locator("button[name=trigger]"), "viewers cannot run schedules")
    forbidden(row.locator("button[name=delete]"), "viewers cannot delete schedules")
    as_user(page, auth_server, tokens["vic"], "/services/web")
    expect(page.locator("h1 .badge")).to_have_text("running", timeout=60_000)
    forbidden(page.locator("button[name=scale]"), "viewers cannot scale services")

    # while their owner may: the same buttons are offered to bob
    as_user(page, auth_server, tokens["bob"], "/schedules")
    expect(page.locator("tr[data-name=nightly] button[name=pause]")).to_be_enabled()
    as_user(page, auth_server, tokens["bob"], f"/pipelines/{run}")
    expect(page.locator("button[name=cancel]")).to_be_enabled(timeout=30_000)
    page.locator("button[name=cancel]").click()
    expect(page.locator(".run-status .badge")).not_to_have_text("running", timeout=30_000)
