"""The jobs list when it has nothing to show says why and what to do: a first visit points to submitting a job,
filters that match nothing offer to clear them, and a page past the end leads back to the first; the page of a job
that is not there (deleted) says so and leads back to the list, and a run deleted while shown is read no more."""

from __future__ import annotations

import httpx
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


def test_a_pipeline_run_deleted_while_shown_says_so_once_and_reads_no_more(server, page):
    r = httpx.post(server.url + "/api/v1/pipelines", content="name: short\nsteps:\n  only:\n    command: echo hi\n",
                   headers={**server.headers, "Content-Type": "application/yaml"}, timeout=30)
    assert r.status_code == 201, r.text
    run = r.json()["id"]
    open_signed_in(page, server.url, server.token, f"/pipelines/{run}")
    expect(page.locator(".dag-node[data-step=only]")).to_have_attribute("data-status", "succeeded", timeout=60_000)
    reads = []
    page.on("request", lambda q: f"/api/v1/pipelines/{run}" in q.url and reads.append(q.url))
    assert httpx.delete(f"{server.url}/api/v1/pipelines/{run}", headers=server.headers, timeout=30).status_code < 300
    gone = page.locator("p.gone")
    expect(gone).to_contain_text(f"No pipeline run {run}: it was deleted")
    seen = len(reads)
    page.wait_for_timeout(5000)
    assert len(reads) == seen  # no read every 2 s of a run that is gone, no toast after toast
    gone.locator("a", has_text="All pipeline runs").click()
    page.wait_for_url(f"{server.url}/pipelines")
    page.goto(f"{server.url}/sweeps/s-0000000000")  # a sweep's page says the same
    expect(page.locator("p.gone")).to_contain_text("No sweep s-0000000000: it was deleted")
