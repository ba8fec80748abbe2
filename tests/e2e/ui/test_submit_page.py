"""The submit page in a real browser against a real server: a spec error shows at its line, naming the
field; validate checks without submitting; a good spec submits and lands on its job's (or run's) page."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in, screenshot

pytestmark = pytest.mark.slow

BAD = """\
name: hello
command: python -c "print('hi')"
resources:
  gpus: 1
  cpu: 1
"""


def jobs(server):
    return httpx.get(server.url + "/api/v1/jobs", headers=server.headers).json()["items"]


def test_a_spec_error_shows_at_its_line_and_a_good_spec_lands_on_its_job(server, page):
    open_signed_in(page, server.url, server.token, "/submit")
    # when a spec with a misspelt field on line 4 is submitted
    page.fill("textarea[name=spec]", BAD)
    page.click("button[name=submit]")
    # then line 4 is marked, and the error beside it names the field and the one meant
    note = page.locator(".line-notes .note[data-line='4']")
    expect(note).to_contain_text("resources.gpus: unknown field 'gpus'; did you mean 'gpu'?")
    expect(page.locator(".gutter span.err")).to_have_count(1)
    expect(page.locator(".gutter span.err")).to_have_attribute("data-line", "4")
    expect(page.locator(".spec-errors li[data-line='4'][data-field='resources.gpus']")).to_be_visible()
    screenshot(page, "submit")
    assert jobs(server) == []
    # and an error found past the parse (no node has that many GPUs) names its line too
    page.fill("textarea[name=spec]", BAD.replace("gpus: 1", "gpu: 64"))
    page.get_by_role("button", name="Validate").click()
    expect(page.locator(".line-notes .note[data-line='4']")).to_contain_text("resources.gpu")
    # when fixed, validate says so and submits nothing
    page.fill("textarea[name=spec]", BAD.replace("gpus: 1", "gpu: 1"))
    expect(page.locator(".gutter span.err")).to_have_count(0)  # stale once edited
    page.get_by_role("button", name="Validate").click()
    expect(page.locator(".spec-errors li.ok")).to_contain_text("valid job")
    assert jobs(server) == []
    # and submitted, it lands on the new job's page
    page.click("button[name=submit]")
    page.wait_for_url("**/jobs/j-*")
    [job] = jobs(server)
    assert page.url.endswith(f"/jobs/{job['id']}") and job["spec"]["resources"]["gpu"] == 1


def test_a_pipeline_is_recognised_submitted_and_lands_on_its_run(server, page):
    open_signed_in(page, server.url, server.token, "/submit")
    page.get_by_role("button", name="a pipeline").click()
    expect(page.locator(".kind")).to_have_text("as a pipeline")
    text = page.input_value("textarea[name=spec]").replace("    command: echo done", "    command: echo done\n    colour: red")
    page.fill("textarea[name=spec]", text)
    page.click("button[name=submit]")
    line = text.splitlines().index("    colour: red") + 1
    expect(page.locator(f".line-notes .note[data-line='{line}']")).to_contain_text("colour")
    page.fill("textarea[name=spec]", text.replace("\n    colour: red", ""))
    page.click("button[name=submit]")
    page.wait_for_url("**/pipelines/p-*")
    expect(page.locator(".dag-group[data-step=train]")).to_contain_text("train × 3")
    # the draft is gone once submitted
    page.goto(server.url + "/submit")
    expect(page.locator(".kind")).to_have_text("as a job")
