"""The compare page follows jobs while they run, as a job's own page does: their charts gain the points logged since
the page opened and their status badges change, while a chart zoomed into keeps its range."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import py_job
from tests.support.browser import drag_zoom, legend_step, open_signed_in

pytestmark = pytest.mark.slow

STREAM = """
import os, sys, time, trainyard
step = 0
while not os.path.exists(sys.argv[1]):
    trainyard.log_metrics(step=step, loss=1.0 / (step + 1))
    step += 1
    time.sleep(0.1)
"""


def test_compare_follows_running_jobs_and_a_zoomed_chart_keeps_its_range(server, page, tmp_path):
    # given two jobs logging a point every 0.1 s until told to stop
    go = tmp_path / "go"
    c = server.client()
    a, b = (c.submit({**py_job(STREAM, name=name), "command": py_job(STREAM)["command"] + [str(go)]})
            for name in ("run-a", "run-b"))
    try:
        # when they are compared while they run
        open_signed_in(page, server.url, server.token, f"/compare?jobs={a.id},{b.id}")
        chart = page.locator(".chart[data-metric=loss]")
        expect(chart.locator("canvas")).to_have_count(1, timeout=30_000)
        expect(chart.locator(".u-legend")).to_contain_text("run-b")
        # then the chart gains the points logged since, without a reload
        seen = legend_step(page, chart)
        page.wait_for_timeout(3000)
        assert legend_step(page, chart) > seen + 10

        # and a range zoomed into stays while more points come
        drag_zoom(page, chart)
        zoomed = legend_step(page, chart)
        page.wait_for_timeout(5000)
        assert max(p.step for p in c.metrics(a.id) if p.name == "loss") > zoomed + 30
        assert legend_step(page, chart) <= zoomed + 1

        # and once they end, their badges say so
        go.write_text("")
        expect(page.locator("table.compare thead [data-status=succeeded]")).to_have_count(2, timeout=30_000)
    finally:
        go.write_text("")
