"""A job's log past a real server's ``log_keep`` reads the same, as lines, to every reader: the download
(``logs.txt``), the API's pages and its stream, the SDK and ``trainyard logs``. The head's open last line ends, the
note stands on lines of its own, and the kept end's first line, cut inside, starts with a mark."""

from __future__ import annotations

import sys
import time

import httpx
import pytest

from tests.support.servers import started_with_config
from trainyard.store.log_bound import MARK
from trainyard.store.telemetry import log_note

pytestmark = pytest.mark.slow

KEEP = 4000  # bytes: the first 2000 and at most the last 2000 stay
# numbered lines of 11 bytes: 0..3300 under the bound, then, once the test lets it go, ..4400 past it; the cut
# keeps 0..2000 (its last line "line 0018") and from 2500 (inside "line 00227")
PRINTER = """
import os, sys, time
sys.stdout.write("".join(f"line {i:05d}\\n" for i in range(300)))
sys.stdout.flush()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
sys.stdout.write("".join(f"line {i:05d}\\n" for i in range(300, 400)))
"""
LINES = "".join(f"line {i:05d}\n" for i in range(400))


def test_every_reader_reads_a_log_cut_by_log_keep_as_whole_lines_and_a_marked_one(tmp_path):
    # given a server that keeps 4000 bytes of a replica's log, and a job that stored 3300 before it printed past it
    srv = started_with_config(tmp_path, f"log_keep: {KEEP}\n")
    try:
        gate = tmp_path / "gate"
        client = srv.client()
        job = client.submit({"name": "cut", "command": [sys.executable, "-c", PRINTER, str(gate)]})
        url = f"{srv.url}/api/v1/jobs/{job.id}"
        for _ in range(600):
            if "line 00299\n" in httpx.get(f"{url}/logs.txt", headers=srv.headers, timeout=30).text:
                break
            time.sleep(0.05)
        gate.write_text("")
        assert job.wait(timeout=60).status == "succeeded"
        # when each reader reads its log
        read = {
            "logs.txt": httpx.get(f"{url}/logs.txt", headers=srv.headers, timeout=30).text,
            "api": "".join(c["data"] for c in httpx.get(f"{url}/logs", headers=srv.headers, timeout=30)
                           .json()["chunks"]),
            "sdk": "".join(c.data for c in client.logs(job.id)),
            "sdk follow": "".join(c.data for c in client.logs(job.id, follow=True)),
            "cli": srv.cli("logs", job.id).stdout,
            "cli follow": srv.cli("logs", "-f", job.id).stdout,
        }
        # then each reads the head ending its line, what was kept from before the bound on a marked line of its own,
        # the note on lines of its own and the rest: no line of the head runs into one of the kept end
        want = LINES[:2000] + "\n" + MARK + LINES[2500:3300] + log_note(KEEP) + LINES[3300:]
        assert read == dict.fromkeys(read, want)
        assert "line 0018\n" + MARK + "e 00227\n" in want
    finally:
        srv.stop_all()
