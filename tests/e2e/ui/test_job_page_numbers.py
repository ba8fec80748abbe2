"""The job page's numbers in a real browser: an attempt's wait counts the time its job stood in line, not only the
launch, and a metric chart keeps the range a person zoomed into while new points come in, with axis labels that fit."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import py_job
from tests.support.browser import drag_zoom, legend_step, open_signed_in
from tests.support.waiting import until

pytestmark = pytest.mark.slow

HOLD = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\n"


def seconds(text: str) -> int:
    """A duration as the page writes it (``42s``, ``1m 5s``) in seconds."""
    m = re.fullmatch(r"(?:(\d+)m )?(\d+)s", text.strip())
    assert m, text
    return int(m.group(1) or 0) * 60 + int(m.group(2))


def test_an_attempt_that_waited_in_line_says_how_long(server, page, tmp_path):
    go = tmp_path / "go"
    c = server.client()
    held = py_job(HOLD, name="blocker", resources={"cpu": 2})
    blocker = c.submit({**held, "command": held["command"] + [str(go)]})
    until(lambda: blocker.refresh().status.value == "running", timeout=60)
    waiter = c.submit(py_job("print('ran')", name="waiter", resources={"cpu": 2}))
    until(lambda: waiter.refresh().reason, timeout=30)  # the scheduler has seen it wait
    time.sleep(4)  # it stands in line a while
    go.write_text("")
    waiter.wait(timeout=60)
    open_signed_in(page, server.url, server.token, f"/jobs/{waiter.id}")
    cell = page.locator("table.attempts tr[data-attempt='1'] td").nth(8)  # #, status, node, GPUs, exit, reason…
    expect(page.locator("table.attempts th").nth(8)).to_have_text("waited")
    expect(cell).to_have_text(re.compile(r"\d+s"))
    assert seconds(cell.inner_text()) >= 4, cell.inner_text()


STREAM = """
import os, sys, time, trainyard
step = 0
while not os.path.exists(sys.argv[1]):
    trainyard.log_metrics(step=step, loss=1.0 / (step + 1), rss_bytes=1.5e9 + step * 1e6)
    step += 1
    time.sleep(0.1)
"""


def test_a_zoomed_chart_keeps_its_range_while_points_come_and_big_values_fit_the_axis(server, page, tmp_path):
    go = tmp_path / "go"
    job = server.client().submit({**py_job(STREAM, name="stream"), "command": py_job(STREAM)["command"] + [str(go)]})
    try:
        open_signed_in(page, server.url, server.token, f"/jobs/{job.id}")
        chart = page.locator(".chart[data-metric=loss]")
        expect(chart.locator("canvas")).to_have_count(1, timeout=30_000)
        page.wait_for_timeout(3000)  # some points to zoom into
        chart.scroll_into_view_if_needed()
        drag_zoom(page, chart)
        zoomed = legend_step(page, chart)
        page.wait_for_timeout(5000)  # the page reads the metrics again, with some 50 new points
        last = max(p.step for p in server.client().metrics(job.id) if p.name == "loss")
        assert last > zoomed + 30
        assert legend_step(page, chart) <= zoomed + 1  # still the range zoomed into, not every step
        # a big value's axis labels fit their axis: nothing is drawn at the chart's left edge
        big = page.locator(".chart[data-metric=rss_bytes] canvas")
        big.scroll_into_view_if_needed()
        inked = big.evaluate("""c => { const d = c.getContext('2d').getImageData(0, 0, 3, c.height).data;
          let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; }""")
        assert inked == 0
    finally:
        go.write_text("")


def test_a_job_page_reads_out_each_metrics_last_least_and_greatest_value(server, page):
    code = ("import trainyard\nfor step in range(1, 6):\n"
            "    trainyard.log_metrics(step=step, loss=1.0 / step, accuracy=0.5 + step / 20)\n")
    job = server.client().submit(py_job(code, name="summed"))
    job.wait(timeout=60)
    open_signed_in(page, server.url, server.token, f"/jobs/{job.id}")
    loss = page.locator("table.metric-summary tr[data-metric=loss] td")
    expect(loss).to_have_text(["loss", "0.2", "5", "0.2", "1", "5"])
    expect(page.locator("table.metric-summary tr[data-metric=accuracy] td")).to_have_text(
        ["accuracy", "0.75", "5", "0.55", "0.75", "5"])
