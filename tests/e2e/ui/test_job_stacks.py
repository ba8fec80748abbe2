"""The job page's Stacks button and command box in a real browser against a real server: each replica's dump
appears as its launcher answers, a command's output and exit code as it ends; an ended job has neither."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import py_job
from tests.support.browser import open_signed_in, screenshot

STUCK = """
import time
def evaluate_checkpoint():
    print("evaluating", flush=True)
    time.sleep(600)
evaluate_checkpoint()
"""


@pytest.mark.slow
def test_the_stacks_button_shows_where_a_running_job_is(server, page):
    c = server.client()
    job = c.submit(py_job(STUCK, name="stuck"))
    open_signed_in(page, server.url, server.token, f"/jobs/{job.id}")
    expect(page.locator(".log-line", has_text="evaluating")).to_be_visible(timeout=30_000)
    button = page.locator("button[name=stacks]")
    expect(button).to_be_enabled()

    button.click()

    dump = page.locator(".stack[data-replica='0']")
    expect(dump).to_have_attribute("data-status", "done", timeout=30_000)
    expect(dump.locator("pre")).to_contain_text("evaluate_checkpoint (")
    expect(dump.locator("[data-status=done]")).to_have_text("done")
    screenshot(page, "job-stacks")
    # again, with the C frames under time.sleep
    page.locator("input[name=native]").check()
    page.locator("button[name=stacks-again]").click()
    expect(dump.locator("pre")).to_contain_text("(libc", timeout=30_000)  # a C frame, in glibc
    # a command beside it, on its node
    page.locator("summary", has_text="Run a command on its node").click()
    page.locator("input[name=command]").fill("echo job=$TRAINYARD_JOB_ID; exit 2")
    page.locator("button[name=run]").click()
    expect(page.locator(".exec-result pre")).to_have_text(f"job={job.id}\n", timeout=30_000)
    expect(page.locator(".exec-result")).to_contain_text("exit 2")
    screenshot(page, "job-exec")
    c.cancel(job.id)
    expect(page.locator("h1 [data-status=cancelled]")).to_be_visible(timeout=30_000)
    expect(button).to_be_disabled()
    expect(page.locator("input[name=command]")).to_have_count(0)
