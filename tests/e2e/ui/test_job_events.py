"""A job page's events while the job is still going: a retry shows among them as it happens, not only once the
job has ended."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import py_job
from tests.support.browser import open_signed_in

pytestmark = pytest.mark.slow

# the first attempt fails once the page is open; the second runs until the test lets it end
FLAKY = """
import os, sys, time
go = sys.argv[1]
while not os.path.exists(go + '.first'):
    time.sleep(0.05)
if os.environ['TRAINYARD_ATTEMPT'] == '1':
    sys.exit(1)
while not os.path.exists(go):
    time.sleep(0.05)
"""


def test_a_retry_shows_in_the_events_of_a_job_still_running(server, page, tmp_path):
    go = tmp_path / "go"
    spec = py_job(FLAKY, name="flaky", retry={"max": 1, "backoff": "1s"})
    job = server.client().submit({**spec, "command": spec["command"] + [str(go)]})
    try:
        open_signed_in(page, server.url, server.token, f"/jobs/{job.id}")
        expect(page.locator("h1 [data-status=running]")).to_be_visible(timeout=30_000)
        page.locator("summary", has_text="Events").click()
        events = page.locator("table.events")
        expect(events).to_contain_text("starting → running")
        (tmp_path / "go.first").write_text("")  # the first attempt fails now
        expect(page.locator("table.attempts tr[data-attempt='2'] [data-status=running]")).to_be_visible(timeout=30_000)
        expect(events).to_contain_text("retrying after")  # while the job still runs
        expect(page.locator("h1 [data-status=running]")).to_be_visible()
    finally:
        go.write_text("")
