"""The job page's numbers in a real browser: an attempt's wait counts the time its job stood in line, not only the
launch, and a metric chart keeps the range a person zoomed into while new points come in, with axis labels that fit."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import py_job
from tests.support.browser import open_signed_in
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
    blocker = c.submit({**py_job(HOLD, name="blocker", resources={"cpu": 2}), "command": py_job(HOLD)["command"] + [str(go)]})
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
