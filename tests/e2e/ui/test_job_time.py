"""A retried job's time is the same in the web UI's jobs list and in `trainyard ls` and `show`: from its first
attempt's start to its end, its failed attempt and the wait before its retry counted, not its last attempt alone;
and while it waits for that retry, its time goes on."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import py_job
from tests.support.browser import open_signed_in
from tests.support.waiting import until

pytestmark = pytest.mark.slow

# fails once (leaving a mark), then succeeds: each attempt runs 2 s
TWICE = ("import os, sys, time\ntime.sleep(2)\nif not os.path.exists(sys.argv[1]):\n"
         "    open(sys.argv[1], 'w').close()\n    sys.exit(1)\n")


def seconds(text: str) -> float:
    """A duration as the UI (``7s``, ``1m 5s``) or the CLI (``6.9s``, ``1m05s``) writes it, in seconds."""
    m = re.fullmatch(r"(?:(\d+)m ?)?(\d+(?:\.\d)?)s", text.strip())
    assert m, text
    return int(m.group(1) or 0) * 60 + float(m.group(2))


def test_a_retried_jobs_time_counts_every_attempt_in_the_ui_and_the_cli(server, page, tmp_path):
    # given a job that failed once and waits 10 s for its retry
    spec = py_job(TWICE, name="twice", retry={"max": 1, "backoff": 10})
    job = server.client().submit({**spec, "command": spec["command"] + [str(tmp_path / "mark")]})
    failed = until(lambda: (j := job.refresh()).attempts and j.attempts[0].ended_at and j, timeout=60).attempts[0]
    open_signed_in(page, server.url, server.token, "/jobs")
    cell = page.locator(f"tr[data-id={job.id}] td").nth(8)  # tick, id, name, status, queue, resources, attempts…
    expect(page.locator("table.list th").nth(8)).to_have_text("duration")

    # when the jobs list shows it waiting, then its time goes on past its first attempt's
    page.wait_for_timeout(4000)
    assert job.refresh().status.value == "pending"
    assert seconds(cell.inner_text()) >= failed.ended_at - failed.started_at + 2, cell.inner_text()
    assert seconds(cell.inner_text()) <= time.time() - failed.started_at + 1, cell.inner_text()

    # and once its retry succeeded, its time is from its first start to its end
    done = job.wait(timeout=90)
    assert done.status.value == "succeeded" and len(done.attempts) == 2
    first, last = done.attempts
    span = last.ended_at - first.started_at
    assert span > (last.ended_at - last.started_at) + 2  # the first attempt and the backoff: more than the last

    expect(page.locator(f"tr[data-id={job.id}][data-status=succeeded]")).to_have_count(1, timeout=30_000)
    assert abs(seconds(cell.inner_text()) - span) <= 0.6, (cell.inner_text(), span)

    # and trainyard ls and show say the same
    listed = server.cli("ls", env={"COLUMNS": "200"})
    assert listed.returncode == 0, listed.stderr
    row = next((line for line in listed.stdout.splitlines() if job.id in line), listed.stdout)
    assert abs(seconds(re.search(r" (\d+\.\ds) ", row).group(1)) - span) <= 0.06, (row, span)
    shown = server.cli("show", job.id, env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    took = re.search(r"^time +(\S+) *$", shown.stdout, re.M)
    assert took and abs(seconds(took.group(1)) - span) <= 0.06, (shown.stdout, span)
