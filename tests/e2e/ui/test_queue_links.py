"""The queues page's counts lead to the jobs behind them: a queue's "1 waiting" opens the jobs list narrowed to
that queue's pending jobs, where a person sees each one's reason."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in
from tests.support.waiting import until

pytestmark = pytest.mark.slow


def test_a_queues_waiting_count_opens_its_waiting_jobs(server, page):
    api = httpx.Client(base_url=server.url, headers=server.headers, timeout=30)
    queue = {"name": "tiny", "team": "cv", "quota": {"jobs": 1}, "borrowing": False}
    r = api.post("/api/v1/queues", json={"queue": queue})
    assert r.status_code in (200, 201), r.text
    c = server.client()
    first = c.submit({"name": "first", "queue": "tiny", "command": "sleep 300", "resources": {"cpu": 0.5}})
    until(lambda: first.refresh().status.value == "running", timeout=60)
    second = c.submit({"name": "second", "queue": "tiny", "command": "sleep 300", "resources": {"cpu": 0.5}})
    other = c.submit({"name": "elsewhere", "command": "sleep 300", "resources": {"cpu": 0.5}})
    try:
        open_signed_in(page, server.url, server.token, "/queues")
        tiny = page.locator(".queue[data-queue=tiny]")
        expect(tiny.locator(".count.waiting")).to_have_text("1 waiting", timeout=30_000)
        tiny.locator(".count.waiting").click()
        page.wait_for_url("**/jobs?queue=tiny&status=pending")
        expect(page.locator("tbody tr[data-id]")).to_have_count(1)
        expect(page.locator(f"tbody tr[data-id={second.id}] td.reason")).to_contain_text("queue tiny runs 1/1 jobs")
        page.go_back()
        tiny.locator(".count.running").click()
        page.wait_for_url("**/jobs?queue=tiny&status=starting&status=running")
        expect(page.locator("tbody tr[data-id]")).to_have_count(1)
        expect(page.locator(f"tbody tr[data-id={first.id}]")).to_be_visible()
    finally:
        for job in (first, second, other):
            c.cancel(job.id)
