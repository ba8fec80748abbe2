"""Following a job's log on a real server that keeps ``log_keep`` bytes of it: a follower reads every byte once,
the note once, when the log passes the bound, whatever the job's reports span; one that asks for cuts is told
which bytes the server no longer keeps."""

from __future__ import annotations

import json
import sys

import httpx
import pytest

from tests.support.servers import started_with_config

pytestmark = pytest.mark.slow

KEEP = 4000  # bytes: the first 2000 and at most the last 2000 stay
# numbered lines of 11 bytes, in reports the follower lets go one by one: 0..1650, ..3300 (one report across the
# head's end, 2000, and past where the first cut keeps from, 2500), ..4400 (past the bound)
PRINTER = """
import os, sys, time
gates = sys.argv[1:]
for n, (first, end) in enumerate([(0, 150), (150, 300), (300, 400)]):
    sys.stdout.write("".join(f"line {i:05d}\\n" for i in range(first, end)))
    sys.stdout.flush()
    while n < len(gates) and not os.path.exists(gates[n]):
        time.sleep(0.05)
"""
NOTE = "[trainyard: this log passed"


def test_a_follower_reads_each_line_once_when_a_report_spans_the_heads_end_and_the_kept_ends_start(tmp_path):
    # given a server that keeps 4000 bytes of a replica's log, and a job whose second report spans 1650..3300
    srv = started_with_config(tmp_path, f"log_keep: {KEEP}\n")
    try:
        gates = [tmp_path / f"gate{n}" for n in range(2)]
        client = srv.client()
        job = client.submit({"name": "span", "command": [sys.executable, "-c", PRINTER, *map(str, gates)]})
        # when a follower reads the log as it comes, letting the job print on once it has each report
        text = ""
        for chunk in client.logs(job.id, follow=True):
            text += chunk.data
            for gate, last in zip(gates, ["line 00149\n", "line 00299\n"]):
                if text.endswith(last):
                    gate.write_text("")
        # then it read every line the job printed once, and the note once, where the stream brought it
        lines = text.split("\n")
        printed = [f"line {i:05d}" for i in range(400)]
        assert [x for x in lines if x.startswith("line ")] == printed
        assert [x for x in lines if x.startswith(NOTE)] == [lines[lines.index("line 00299") + 2]]
        assert client.get(job.id).status == "succeeded"
    finally:
        srv.stop_all()


def events(srv, job_id: str, **params: str) -> list[tuple[str, str]]:  # noqa: ANN001
    """(event, data) of each event of the job's log stream, to its end."""
    out, event, data = [], "message", []
    with httpx.stream("GET", f"{srv.url}/api/v1/jobs/{job_id}/logs", params={"follow": "true", **params},
                      headers=srv.headers, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line.partition(":")[2].strip()
            elif line.startswith("data:"):
                data.append(line.partition(":")[2].strip())
            elif not line and data:
                out.append((event, "\n".join(data)))
                event, data = "message", []
    return out


def test_a_stream_asked_for_cuts_says_where_the_kept_end_of_a_log_past_log_keep_starts(tmp_path):
    # given a server that keeps 4000 bytes of a replica's log, and a job that printed 6600
    srv = started_with_config(tmp_path, f"log_keep: {KEEP}\n")
    try:
        printer = "import sys; sys.stdout.write(''.join(f'line {i:05d}\\n' for i in range(600)))"
        job = srv.client().submit({"name": "long", "command": [sys.executable, "-c", printer]})
        assert job.wait(timeout=60).status == "succeeded"
        # when its log is followed with cuts, and without
        cut = events(srv, job.id, cuts="true")
        plain = events(srv, job.id)
        # then the first stream says once, after the chunks, that bytes 2000..4750 are gone (the kept end starts
        # at the step of 250 bytes past 6600 - 2000); the second, which a client that takes every event for a
        # chunk reads, is as it was
        assert [json.loads(d) for e, d in cut if e == "cut"] == [{"attempt": 1, "replica": 0, "head": 2000,
                                                                   "tail": 4750}]
        assert [e for e, _ in cut] == [*(e for e, _ in plain[:-1]), "cut", "end"]
        assert {e for e, _ in plain} == {"message", "end"}
    finally:
        srv.stop_all()
