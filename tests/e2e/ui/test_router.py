"""The UI's router in a real browser: a page whose first API answer comes after the user has gone
back never draws over the page shown since."""

from __future__ import annotations

import sys

import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in

pytestmark = pytest.mark.slow


def test_a_page_answered_after_the_user_went_back_draws_nothing_over_the_page_shown(server, page):
    job = server.client().submit({"name": "routed", "command": [sys.executable, "-c", "pass"]})
    job.wait(timeout=60)
    open_signed_in(page, server.url, server.token, "/jobs")
    expect(page.locator(f"tbody tr[data-id='{job.id}']")).to_have_count(1)
    held = []  # the job page's first read, kept from the page until the user is back on the list
    page.route(f"**/api/v1/jobs/{job.id}", lambda route: held.append(route))
    page.evaluate("url => import('/ui/app.js').then(m => m.navigate(url))", f"/jobs/{job.id}")
    page.wait_for_function("location.pathname.startsWith('/jobs/j-')")
    while not held:
        page.wait_for_timeout(20)
    page.go_back()
    page.wait_for_function("location.pathname === '/jobs'")
    expect(page.locator(f"tbody tr[data-id='{job.id}']")).to_have_count(1)
    held[0].continue_()  # the job page's render goes on now, with the list shown
    page.wait_for_timeout(1000)
    expect(page.locator("button[name=cancel]")).to_have_count(0)  # the job page's own button
    expect(page.locator(f"tbody tr[data-id='{job.id}']")).to_have_count(1)
