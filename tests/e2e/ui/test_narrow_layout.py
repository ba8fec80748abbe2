"""The UI at the sizes people use it: a 1280×800 laptop and a 400 px wide phone or side panel. The page never
scrolls sideways (a wide table scrolls inside its own box), so every link of the top bar and the way to sign out
stay on screen."""

from __future__ import annotations

import pytest

from tests.support.browser import open_signed_in, screenshot

pytestmark = pytest.mark.slow

# what a pipeline run, a sweep and a person put on jobs: long labels, several to a job
LABELS = {"experiment": "resnet50-imagenet-baseline-warmup", "dataset": "imagenet-2012-train-shards-v3",
          "owner": "ann"}
SIDEWAYS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def labelled_jobs(server) -> list[str]:
    c = server.client()
    return [c.submit({"name": f"labelled-{i}", "command": "true", "labels": LABELS}).id for i in range(3)]


def test_a_narrow_window_keeps_the_top_bar_and_scrolls_wide_tables_in_their_box(server, page):
    jobs = labelled_jobs(server)
    page.set_viewport_size({"width": 400, "height": 800})
    open_signed_in(page, server.url, server.token, "/jobs")
    page.wait_for_selector(f"tr[data-id={jobs[0]}]")
    screenshot(page, "jobs-narrow")
    assert page.evaluate(SIDEWAYS) <= 0  # the page itself does not scroll sideways
    # the way out is on screen, not past the right edge
    box = page.locator("#signout").bounding_box()
    assert box is not None and box["x"] + box["width"] <= 400
    # the table scrolls in its own box
    assert page.evaluate("(t => t.scrollWidth > t.clientWidth)(document.querySelector('table.list'))")
    # every link of the top bar can be reached, the last one too, and leads to its page
    page.locator("#nav a[data-nav=submit]").click()
    page.wait_for_function("location.pathname === '/submit'")
    for path in ("/queues", f"/jobs/{jobs[0]}"):
        page.goto(server.url + path)
        page.wait_for_selector("main h1, main h2")
        page.wait_for_timeout(500)
        assert page.evaluate(SIDEWAYS) <= 0, path


def test_the_jobs_list_fits_a_laptop_screen_with_long_labels(server, page):
    jobs = labelled_jobs(server)
    page.set_viewport_size({"width": 1280, "height": 800})
    open_signed_in(page, server.url, server.token, "/jobs")
    page.wait_for_selector(f"tr[data-id={jobs[0]}] .label-chip")
    assert page.evaluate(SIDEWAYS) <= 0
    reason = page.locator("table.list thead th").last.bounding_box()
    assert reason is not None and reason["x"] + reason["width"] <= 1280  # the reason column is whole on screen
