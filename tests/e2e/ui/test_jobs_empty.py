"""The jobs list when it has nothing to show says why and what to do: a first visit points to submitting a job,
filters that match nothing offer to clear them, and a page past the end leads back to the first; the page of a job
that is not there (deleted) says so and leads back to the list."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in

pytestmark = pytest.mark.slow


def test_an_empty_jobs_list_says_why_and_what_to_do(server, page):
    open_signed_in(page, server.url, server.token, "/jobs")
    empty = page.locator("td.empty")
    expect(empty).to_contain_text("No jobs yet. Submit one with trainyard run job.yaml")
    empty.locator("a", has_text="Submit").click()
    page.wait_for_url(f"{server.url}/submit")

    job = server.client().submit({"name": "only", "command": "true"})
    page.goto(f"{server.url}/jobs?status=failed&q=only")
    expect(empty).to_contain_text("No jobs match these filters.")
    empty.locator("a", has_text="Clear them").click()
    expect(page.locator(f"tr[data-id={job.id}]")).to_be_visible()

    page.goto(f"{server.url}/jobs?page=3")
    expect(empty).to_contain_text("No jobs on this page.")
    empty.locator("a", has_text="First page").click()
    expect(page.locator(f"tr[data-id={job.id}]")).to_be_visible()
    assert "page=" not in page.url


def test_the_page_of_a_job_that_is_not_there_leads_back_to_the_list(server, page):
    job = server.client().submit({"name": "gone-soon", "command": "true"})
    job.wait(timeout=60)
    server.client().delete(job.id)
    logged = []
    page.on("console", lambda m: m.type == "error" and "ApiError" in m.text and logged.append(m.text))
    open_signed_in(page, server.url, server.token, f"/jobs/{job.id}")
    gone = page.locator("p.gone")
    expect(gone).to_contain_text(f"Not found: no such job: {job.id}. It may have been deleted")
    gone.locator("a", has_text="All jobs").click()
    page.wait_for_url(f"{server.url}/jobs")
    expect(page.locator("td.empty")).to_contain_text("No jobs yet")
    assert not logged  # nothing broke: no error in the console for a job that is not there
