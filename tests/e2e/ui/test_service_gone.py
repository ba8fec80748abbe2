"""One service's page in a real browser: its address opens the service (through /serve/, signed in by the page's
cookie) in a tab of its own, and the page of a service that is not there says so, with the way back to the list,
instead of empty panels behind a toast that fades."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import PY
from tests.support.browser import open_signed_in

pytestmark = pytest.mark.slow
APP = str(Path(__file__).resolve().parents[2] / "support" / "replica_app.py")


def test_a_services_address_opens_it_and_a_deleted_service_says_so(server, page):
    client = server.client()
    client.services.apply({"name": "web", "command": [PY, APP], "resources": {"cpu": 0.5},
                           "service": {"replicas": 1, "readiness": {"path": "/healthz", "period": "0.2s"}}})
    client.services.wait_ready("web", 1, timeout=60)
    open_signed_in(page, server.url, server.token, "/services/web")
    expect(page.locator(".ready")).to_have_text("1 ready of 1 wanted", timeout=30_000)
    with page.expect_popup() as opened:
        page.locator("dd[data-key=address] a").click()
    tab = opened.value
    tab.wait_for_load_state()
    assert tab.url == f"{server.url}/serve/web/"
    assert '"path": "/"' in tab.inner_text("body")  # the replica answered (whoami's shape), not a 401
    tab.close()

    client.services.delete("web")  # a deleted service stays listed as stopped, its page live
    expect(page.locator("h1 [data-status=stopped]")).to_be_visible(timeout=30_000)

    page.goto(f"{server.url}/services/wbe")  # a link with a typo, or to a service of another team
    gone = page.locator("p.gone")
    expect(gone).to_contain_text("No service named wbe")
    page.wait_for_timeout(9000)  # after any toast has faded, the page still says why it is empty
    expect(gone).to_be_visible()
    gone.locator("a", has_text="All services").click()
    page.wait_for_url(f"{server.url}/services")
