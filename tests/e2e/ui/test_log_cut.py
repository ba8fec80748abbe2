"""The job page's live log of a log past the server's ``log_keep`` shows what a reload shows: the head, the note,
the kept end. The bytes the server drops (the middle when the log passes the bound, the kept end's oldest bytes as
the log goes on) leave the live view too, and a line the person reads stays where it is while lines above it go."""

from __future__ import annotations

import re
import sys
import time

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in
from tests.support.servers import started_with_config
from trainyard.store.telemetry import log_note

pytestmark = pytest.mark.slow

KEEP = 4000  # bytes: the first 2000 and at most the last 2000 stay
# numbered lines of 11 bytes, in reports the test lets go one by one; the server's kept end starts at 2500 after
# the fourth (the chunks from 2500 to 3300 were kept from before the bound: before the note), 3000 after the fifth,
# 4750 after the last (what was kept from before is gone: the note stands between the head and the kept end)
BATCHES = [(0, 150), (150, 200), (200, 300), (300, 400), (400, 450), (450, 600)]
PRINTER = f"""
import os, sys, time
gates = sys.argv[1:]
for n, (first, end) in enumerate({BATCHES}):
    sys.stdout.write("".join(f"line {{i:05d}}\\n" for i in range(first, end)))
    sys.stdout.flush()
    while n < len(gates) and not os.path.exists(gates[n]):
        time.sleep(0.05)
"""
NOTE = log_note(KEEP).strip("\n")
COUNT = ".log-tools .count"

ALL_LINES = """async () => {
    // every line of the view, scrolled through (only the rows on screen are drawn)
    const box = document.querySelector('.logview');
    const seen = new Map();
    for (let top = 0; ; top += box.clientHeight / 2) {
        box.scrollTop = top;
        box.dispatchEvent(new Event('scroll'));
        await new Promise((r) => requestAnimationFrame(() => r()));
        for (const row of box.querySelectorAll('.log-line')) {
            seen.set(+row.dataset.line, row.textContent.slice(row.querySelector('.log-no').textContent.length));
        }
        if (top + box.clientHeight >= box.scrollHeight) break;
    }
    return [...seen.keys()].sort((a, b) => a - b).map((n) => seen.get(n));
}"""


def lines(n: int, end: int) -> list[str]:
    return [f"line {i:05d}" for i in range(n, end)]


def reloaded(page, srv, job_id: str, last: str, whole: bool = True,  # noqa: ANN001
             ended: bool = False) -> tuple[list[str], str]:
    """The job page's log opened afresh, once it shows ``last`` (and its end, if ``ended``): its lines (with
    ``whole``) and its count."""
    fresh = page.context.new_page()
    try:
        open_signed_in(fresh, srv.url, srv.token, f"/jobs/{job_id}")
        expect(fresh.locator(".logview .log-line", has_text=last)).to_be_visible(timeout=30_000)
        if ended:
            expect(fresh.locator(COUNT)).to_contain_text("ended", timeout=30_000)
        return fresh.evaluate(ALL_LINES) if whole else [], fresh.locator(COUNT).inner_text()
    finally:
        fresh.close()


def place(page, row) -> float:  # noqa: ANN001
    """How far below the top of the log view ``row`` is (the page above it may still grow), once the view has
    stopped moving it (a jump draws in more than one frame)."""
    frames = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
    y = None
    while y != (y := row.bounding_box()["y"] - page.locator(".logview").bounding_box()["y"]):
        page.evaluate(frames)
    return y


def stored(srv, job_id: str, last: str) -> None:  # noqa: ANN001
    """Wait until the server holds ``last``."""
    for _ in range(600):
        if last in httpx.get(f"{srv.url}/api/v1/jobs/{job_id}/logs.txt", headers=srv.headers, timeout=30).text:
            return
        time.sleep(0.05)
    raise AssertionError(f"{last} never reached the server")


def test_the_live_log_drops_what_the_server_drops_of_a_log_past_log_keep(tmp_path, page):
    # given a server that keeps 4000 bytes of a replica's log, and the page of a job that prints past it
    srv = started_with_config(tmp_path, f"log_keep: {KEEP}\n")
    try:
        gates = [tmp_path / f"gate{n}" for n in range(len(BATCHES) - 1)]
        job = srv.client().submit({"name": "past-keep", "command": [sys.executable, "-c", PRINTER, *map(str, gates)]})
        open_signed_in(page, srv.url, srv.token, f"/jobs/{job.id}")
        view = page.locator(".logview")
        # when its lines come while the page shows them, the fourth report passing the bound
        for gate, last in zip(gates, ["line 00149", "line 00199", "line 00299"]):
            expect(view.locator(".log-line", has_text=last)).to_be_visible(timeout=30_000)
            gate.write_text("")
        expect(view.locator(".log-line", has_text="line 00399")).to_be_visible(timeout=30_000)
        # then the middle is gone from the live view as from a reload: the head (its last line cut at byte 2000),
        # what was kept from before the bound (its first line cut at 2500), the note, what came after
        again, count = reloaded(page, srv, job.id, "line 00399")
        expect(page.locator(COUNT)).to_have_text(count)
        assert again == [*lines(0, 181), "line 0018", "e 00227", *lines(228, 300), NOTE, *lines(300, 400)]
        assert page.evaluate(ALL_LINES) == again

        # when the person reads a line of the kept end and the next report moves the kept end past lines above it
        page.fill("input[name=search]", "line 00350")
        page.press("input[name=search]", "Enter")
        expect(view.locator(".log-line.current")).to_have_text(re.compile("line 00350$"))  # drawn where the search put it
        row = view.locator(".log-line", has_text="line 00350")
        before = place(page, row)
        gates[3].write_text("")
        stored(srv, job.id, "line 00449")
        again, count = reloaded(page, srv, job.id, "line 00449")
        expect(page.locator(COUNT)).to_have_text(count)
        # then the view has dropped them, and the line read stays where it was on the screen
        assert again == [*lines(0, 181), "line 0018", "72", *lines(273, 300), NOTE, *lines(300, 450)]
        expect(row).to_be_visible()
        assert place(page, row) == before
        assert page.evaluate(ALL_LINES) == again

        # and once the kept end has moved past what was kept from before the bound, the note stands between the
        # head and the kept end, live as on a reload
        gates[4].write_text("")
        expect(page.locator("h1 [data-status=succeeded]")).to_be_visible(timeout=30_000)
        again, count = reloaded(page, srv, job.id, "line 00599", ended=True)
        expect(page.locator(COUNT)).to_have_text(count)
        assert again == [*lines(0, 181), "line 0018", NOTE, "1", *lines(432, 600)]
        assert page.evaluate(ALL_LINES) == again
    finally:
        srv.stop_all()


def test_a_line_read_in_a_log_taller_than_the_page_stays_on_screen_when_lines_above_it_go(tmp_path, page):
    # given a server that keeps 8 MiB of a replica's log, and the page of a job that printed 600,000 lines (4.8 MB),
    # more than the view draws by pixels (past 8,000,000 px it places lines by the scroll fraction)
    srv = started_with_config(tmp_path, "log_keep: 8Mi\n")
    try:
        gate = tmp_path / "gate"
        printer = ("import os, sys, time\nsys.stdout.write(''.join(f'{i:07d}\\n' for i in range(600_000)))\n"
                   "sys.stdout.flush()\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
                   "sys.stdout.write(''.join(f'{i:07d}\\n' for i in range(600_000, 1_100_000)))\n")
        job = srv.client().submit({"name": "tall", "command": [sys.executable, "-c", printer, str(gate)]})
        open_signed_in(page, srv.url, srv.token, f"/jobs/{job.id}")
        expect(page.locator(COUNT)).to_have_text("600,000 lines", timeout=60_000)
        # when the person reads a line near its end
        page.fill("input[name=search]", "0590000")
        page.press("input[name=search]", "Enter")
        row = page.locator(".logview .log-line", has_text="0590000")
        expect(page.locator(".logview .log-line.current")).to_have_text(re.compile("0590000$"))
        before = place(page, row)
        # and the job prints past the bound, the server dropping 65,536 lines above it (bytes 4 MiB..4.5 MiB)
        gate.write_text("")
        expect(page.locator("h1 [data-status=succeeded]")).to_be_visible(timeout=60_000)
        _, count = reloaded(page, srv, job.id, "1099999", whole=False, ended=True)
        expect(page.locator(COUNT)).to_have_text(count, timeout=30_000)
        assert count == "1,034,465 lines · ended"  # 524,288 of the head, the note, from line 589,824 on
        # then the line read stays where it was on the screen
        expect(row).to_be_visible()
        assert place(page, row) == before
    finally:
        srv.stop_all()
