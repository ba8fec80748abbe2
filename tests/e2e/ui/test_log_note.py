"""The job page's live log shows the server's note of a log past ``log_keep`` (a chunk at offset -1, no bytes of the
log) where a reload reads it: after the chunks kept from before the log passed the bound, not skipped as an offset
already seen."""

from __future__ import annotations

import sys

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in
from tests.support.servers import started_with_config

pytestmark = pytest.mark.slow

KEEP = 4000  # bytes: the first 2000 and at most the last 2000 stay
# numbered lines of 11 bytes, in four reports the test lets go one by one: 0..1650, ..2200 (crossing the head's
# end), ..3300 (under the bound: kept, then cut at 2500 when the fourth passes it), ..4400 (past the bound)
PRINTER = """
import os, sys, time
gates = sys.argv[1:]
for n, (first, end) in enumerate([(0, 150), (150, 200), (200, 300), (300, 400)]):
    sys.stdout.write("".join(f"line {i:05d}\\n" for i in range(first, end)))
    sys.stdout.flush()
    while n < len(gates) and not os.path.exists(gates[n]):
        time.sleep(0.05)
"""
NOTE = "this log passed"


def around_note(page) -> list[str]:  # noqa: ANN001
    """The two lines before the note's line, it, and the line after, as the log view shows them."""
    page.fill("input[name=search]", NOTE)
    page.press("input[name=search]", "Enter")
    expect(page.locator(".log-tools .matches")).to_have_text("1 / 1")  # the note, once
    return page.evaluate("""() => {
        const at = +document.querySelector('.log-line.current').dataset.line;
        const text = (n) => {
            const row = document.querySelector(`.log-line[data-line="${n}"]`);
            return row.textContent.slice(row.querySelector('.log-no').textContent.length);
        };
        return [text(at - 2), text(at - 1), text(at), text(at + 1)];
    }""")


def test_the_live_log_shows_the_note_of_a_log_past_log_keep_where_a_reload_reads_it(tmp_path, page):
    # given a server that keeps 4000 bytes of a replica's log, and the page of a job that prints past it
    srv = started_with_config(tmp_path, f"log_keep: {KEEP}\n")
    try:
        gates = [tmp_path / f"gate{n}" for n in range(3)]
        job = srv.client().submit({"name": "past-keep", "command": [sys.executable, "-c", PRINTER, *map(str, gates)]})
        open_signed_in(page, srv.url, srv.token, f"/jobs/{job.id}")
        view = page.locator(".logview")
        # when its lines come while the page shows them, the last report passing the bound
        for gate, last in zip(gates, ["line 00149", "line 00199", "line 00299"]):
            expect(view.locator(".log-line", has_text=last)).to_be_visible(timeout=30_000)
            gate.write_text("")
        expect(view.locator(".log-line", has_text="line 00399")).to_be_visible(timeout=30_000)
        expect(page.locator("h1 [data-status=succeeded]")).to_be_visible(timeout=30_000)
        # then the note shows, once, between the same lines as in the log the server reads back
        text = httpx.get(f"{srv.url}/api/v1/jobs/{job.id}/logs.txt", headers=srv.headers, timeout=30).text
        lines = text.split("\n")
        [at] = [i for i, line in enumerate(lines) if NOTE in line]
        assert "line 00299" in lines[:at], lines[at - 4:at + 2]  # what was kept from before the bound: before it
        live = around_note(page)
        # the view shows the note as lines of its own: the line break it starts with (to start it on a line in the
        # plain text) makes no empty line there
        assert lines[at - 1] == "" and live == [lines[at - 3], lines[at - 2], *lines[at:at + 2]]
        # and a reload of the page shows it there too
        page.reload()
        expect(view.locator(".log-line", has_text="line 00399")).to_be_visible(timeout=30_000)
        assert around_note(page) == live
    finally:
        srv.stop_all()
