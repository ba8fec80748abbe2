"""The services pages in a real browser against a real server: the list with replicas, traffic and
address; one service's replicas (their jobs linked), restarts after a crash, and scaling from the page."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import PY
from tests.support.browser import open_signed_in, screenshot

pytestmark = pytest.mark.slow
APP = str(Path(__file__).resolve().parents[2] / "support" / "replica_app.py")


def test_the_services_pages_show_replicas_traffic_restarts_and_scale(server, page):
    # given a service of one replica that answered 4 requests and crashed on a fifth
    client = server.client()
    client.services.apply({"name": "web", "command": [PY, APP], "resources": {"cpu": 0.5},
                           "service": {"replicas": 1, "readiness": {"path": "/healthz", "period": "0.2s"}}})
    first = client.services.wait_ready("web", 1, timeout=60).replicas[0].job_id
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as http:
        assert all(http.get("/serve/web/whoami").status_code == 200 for _ in range(4))
        assert http.get("/serve/web/crash").status_code == 502

    # when the list is open, then it shows the service's replicas, traffic and address
    open_signed_in(page, server.url, server.token, "/services")
    row = page.locator("tr[data-service=web]")
    expect(row.locator(".requests")).to_have_text("5", timeout=30_000)
    expect(row.locator(".errors")).to_have_text("20.0%")
    expect(row.locator(".p50")).to_contain_text(" ms")
    expect(row).to_contain_text("/serve/web/")
    expect(page.locator("#nav a[data-nav=services]")).to_have_class("active")

    # and the service's page: the crashed replica replaced by a new job, counted as a restart
    row.locator("a", has_text="web").click()
    page.wait_for_url("**/services/web")
    expect(page.locator(".restarts")).to_have_text("1", timeout=60_000)
    expect(page.locator(".ready")).to_have_text("1 ready of 1 wanted", timeout=60_000)
    replacement = page.locator("table.replicas tbody tr").first
    expect(replacement.locator(".readiness")).to_have_text("yes")
    job = replacement.get_attribute("data-job")
    assert job != first and job == client.services.get("web").replicas[0].job_id
    expect(page.locator(".try")).to_contain_text("not the built-in model server")
    screenshot(page, "services")

    # a browser that opens the service's address without a session signs in and comes back to it
    fresh = page.context.browser.new_context()
    try:
        direct = fresh.new_page()
        direct.goto(server.url + "/serve/web/whoami?x=1")
        direct.wait_for_url("**/login?next=**")
        direct.fill("input[name=token]", server.token)
        direct.click("button[type=submit]")
        direct.wait_for_url("**/serve/web/whoami?x=1")
        seen = json.loads(direct.inner_text("body"))
        assert seen["path"] == "/whoami?x=1" and "cookie" not in seen["headers"]  # the session stays here
        assert server.token not in direct.url
        cookies = [c for c in fresh.cookies() if c["name"] == "trainyard_serve"]
        assert sorted(c["path"] for c in cookies) == ["/api/v1/clusters/", "/serve/"]  # also clusters' dashboards
        assert all(c["httpOnly"] and c["sameSite"] == "Strict" for c in cookies)
        # its cookie gone (as on a link from another site, where a Strict cookie is not sent), the browser's
        # token signs it in again without asking
        fresh.clear_cookies()
        direct.goto(server.url + "/serve/web/whoami?y=2")
        direct.wait_for_url("**/serve/web/whoami?y=2")
        assert json.loads(direct.inner_text("body"))["path"] == "/whoami?y=2"
    finally:
        fresh.close()

    # when scaled to 0 from the page, then no replica is wanted and the service says so
    page.fill("input[name=replicas]", "0")
    page.click("button[name=scale]")
    expect(page.locator(".ready")).to_contain_text("of 0 wanted")
    assert client.services.get("web").spec.service.replicas == 0
    # and a replica's job is one click away
    open_signed_in(page, server.url, server.token, f"/jobs/{job}")
    expect(page.locator("h1")).to_contain_text("web")
    client.services.delete("web")
