"""Reporting to the API: streaming, retries across a control-plane restart, giving up."""

from __future__ import annotations

import json
import socket
import time

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, ReportServer, log_of, make_config, read_result, report_server, run_launcher, script,
    start_launcher,
)
from tests.support.waiting import until
from trainyard.launch import reporter as reporter_mod
from trainyard.launch.config import LaunchConfig

TALKER = """
import sys, time, trainyard
for i in range(int(sys.argv[1])):
    print(f"line {i}", flush=True)
    trainyard.log_metrics(step=i, acc=i / 10)
    time.sleep(float(sys.argv[2]))
"""


def dead_url() -> str:
    """A URL where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def contiguous(reports: list[dict], key: str) -> bool:
    """Each chunk starts where the last ended: nothing sent twice, nothing skipped."""
    end = 0
    for r in reports:
        if key in r:
            if r[key]["offset"] != end:
                return False
            end += len(r[key]["data"].encode()) if key == "log" else sum(len(x) + 1 for x in r[key]["lines"])
    return True


def test_logs_reach_the_server_while_the_command_runs(tmp_path, report_server):
    # the command waits for a flag the test sets only once the server has its line (latency: bench/timings.py)
    flag = tmp_path / "flag"
    cmd = script(tmp_path, "job.py", f"import pathlib, time\nprint('hello early', flush=True)\n"
                                     f"while not pathlib.Path({str(flag)!r}).exists(): time.sleep(0.02)\n")
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, cmd)
    proc = start_launcher(attempt)
    until(lambda: b"hello early" in report_server.log_bytes(), timeout=30)
    assert report_server.final() is None and proc.poll() is None  # still running
    flag.touch()
    proc.communicate(timeout=20)
    assert report_server.final()["result"]["reason"] == "Succeeded"


def test_split_utf8_character_arrives_whole(tmp_path, report_server):
    cmd = script(tmp_path, "job.py", """
import os, sys, time
snow = "☃".encode()
os.write(1, b"a" + snow[:1])
time.sleep(0.5)
os.write(1, snow[1:] + b"b\\n")
""")
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, cmd)
    run_launcher(attempt)
    assert report_server.log_bytes().decode() == "a☃b\n"
    assert all("\ufffd" not in r["log"]["data"] for r in report_server.snapshot() if "log" in r)


def test_server_restart_on_another_port_loses_nothing(tmp_path):
    # the first server answers 503 to everything (going down); the launcher must retry there, then follow
    # the address file to the new one
    old = ReportServer()
    old.answer = lambda body: (503, {"detail": "shutting down"})
    address = tmp_path / "address.json"
    address.write_text(json.dumps({"url": old.url}))
    attempt = tmp_path / "attempt"
    make_config(attempt, old.url, script(tmp_path, "job.py", TALKER) + ["20", "0.1"],
                address_file=str(address))
    proc = start_launcher(attempt)
    server = None
    try:
        until(lambda: old.requests >= 2, timeout=30)  # reports hit the old address, and were retried there
        old.close()  # now nothing listens there at all
        server = ReportServer()
        address.write_text(json.dumps({"url": server.url}))
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        result = read_result(attempt)
        assert result["reason"] == "Succeeded"
        assert old.snapshot() == []  # none acknowledged there: everything went to the new server
        reports = server.snapshot()
        assert reports[0]["log"]["offset"] == 0  # offsets did not move on a refused report
        assert server.log_bytes() == (attempt / "output.log").read_bytes()
        assert contiguous(reports, "log") and contiguous(reports, "metrics")
        assert [json.loads(x)["step"] for x in server.metric_lines()] == list(range(20))
        assert reports[-1]["result"] == result
        assert sum("result" in r for r in reports) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
        if server:
            server.close()


def test_server_errors_are_retried_and_offsets_only_move_on_success(tmp_path, report_server):
    calls = {"n": 0}

    def flaky(body):
        calls["n"] += 1
        return (503, {}) if calls["n"] % 3 == 0 else (200, {"cancel": False})

    report_server.answer = flaky
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, script(tmp_path, "job.py", TALKER) + ["10", "0.05"])
    result = run_launcher(attempt)
    assert result["reason"] == "Succeeded"
    assert report_server.requests > len(report_server.snapshot())  # some were refused
    reports = report_server.snapshot()
    assert contiguous(reports, "log") and contiguous(reports, "metrics")
    assert report_server.log_bytes() == (attempt / "output.log").read_bytes()
    assert [json.loads(x)["step"] for x in report_server.metric_lines()] == list(range(10))


def test_forgotten_attempt_stops_reporting_but_finishes(tmp_path, report_server):
    report_server.answer = lambda body: (404, {"detail": "no such attempt"})
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, script(tmp_path, "job.py", TALKER) + ["5", "0.05"])
    result = run_launcher(attempt)
    assert result["reason"] == "Succeeded"
    assert report_server.requests == 1


def test_gives_up_after_the_exit_report_deadline(tmp_path):
    attempt = tmp_path / "attempt"
    make_config(attempt, dead_url(), [PYTHON, "-c", "print('x')"], exit_report_deadline=1.0)
    start = time.monotonic()
    result = run_launcher(attempt)
    assert result["reason"] == "Succeeded"
    assert time.monotonic() - start >= 1.0  # it kept trying until the deadline, then gave up (not forever)


def test_heartbeat_when_nothing_is_new(tmp_path, report_server, monkeypatch):
    monkeypatch.setattr(reporter_mod, "HEARTBEAT", 0.2)
    config = LaunchConfig(job_id="j", attempt_id="a", attempt=1, server=report_server.url, command=["x"])
    rep = reporter_mod.Reporter(config, str(tmp_path / "log"), str(tmp_path / "metrics"), lambda: None)
    rep.start()
    time.sleep(0.3)
    assert report_server.snapshot() == []  # nothing before the command starts
    rep.started(12345)
    until(lambda: len(report_server.snapshot()) >= 3)  # 0.6 s idle; far longer when its thread waits for a core
    assert rep.finish({"exit_code": 0, "reason": "Succeeded", "message": "", "outputs": []})
    reports = report_server.snapshot()
    assert all(r["pid"] == 12345 for r in reports)
    assert [r["phase"] for r in reports[:3]] == ["running"] * 3 and "result" in reports[-1]


def test_cancel_answer_reaches_the_callback(tmp_path, report_server):
    report_server.answer = lambda body: (200, {"cancel": True})
    cancelled = []
    config = LaunchConfig(job_id="j", attempt_id="a", attempt=1, server=report_server.url, command=["x"])
    rep = reporter_mod.Reporter(config, str(tmp_path / "log"), str(tmp_path / "metrics"), lambda: cancelled.append(1))
    rep.start()
    rep.started(1)
    until(lambda: cancelled)
    rep.finish({"exit_code": None, "reason": "Cancelled", "message": "", "outputs": []})


def test_a_refused_credential_is_read_again_from_launch_json(tmp_path, report_server):
    report_server.token = "renewed"
    attempt = tmp_path / "attempt"
    config = make_config(attempt, report_server.url, script(tmp_path, "job.py", TALKER) + ["20", "0.05"],
                         token="old")
    proc = start_launcher(attempt)
    until(lambda: report_server.requests >= 1)  # refused: the launcher read "old"

    # as the engine does for a replica already running when its gang is launched again after a restart
    config.token = "renewed"
    config.write(attempt)

    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert report_server.final() is not None
    assert {h["Authorization"] for h in report_server.headers} == {"Bearer renewed"}


def _result(reason: str = "Succeeded") -> dict:
    return {"exit_code": 0, "reason": reason, "message": "", "outputs": []}


def test_a_command_over_before_its_first_report_is_reported_in_one_request_without_a_thread(tmp_path, report_server):
    (tmp_path / "log").write_bytes(b"all of it\n")
    (tmp_path / "metrics").write_bytes(b'{"step": 1}\n{"step": 2')  # the last line never completed
    config = LaunchConfig(job_id="j", attempt_id="a", attempt=1, server=report_server.url, command=["x"])
    rep = reporter_mod.Reporter(config, str(tmp_path / "log"), str(tmp_path / "metrics"), lambda: None)
    rep.started(4321)
    seen = []
    assert rep.final_inline(_result(), lambda: seen.append(report_server.requests))
    assert seen == [0] or seen == [1]  # it ran once, while the server had the request
    assert rep.wait() and not rep.running and rep._thread is None  # nor was one made: ~0.1 ms a launcher
    [only] = report_server.snapshot()
    assert only["phase"] == "exited" and only["pid"] == 4321 and only["result"] == _result()
    assert only["log"] == {"offset": 0, "data": "all of it\n"}
    assert only["metrics"] == {"offset": 0, "lines": ['{"step": 1}']}


def test_a_refused_inline_report_is_sent_again_by_the_thread(tmp_path, report_server):
    calls = {"n": 0}

    def refuse_first(body):
        calls["n"] += 1
        return (503, {}) if calls["n"] == 1 else (200, {"cancel": False})

    report_server.answer = refuse_first
    (tmp_path / "log").write_bytes(b"x" * 100)
    config = LaunchConfig(job_id="j", attempt_id="a", attempt=1, server=report_server.url, command=["x"])
    rep = reporter_mod.Reporter(config, str(tmp_path / "log"), str(tmp_path / "metrics"), lambda: None)
    rep.started(1)
    ran = []
    assert not rep.final_inline(_result(), lambda: ran.append(1))
    assert ran == [1]
    rep.deliver(_result())
    assert rep.wait() and rep.running
    reports = report_server.snapshot()
    assert report_server.requests == 1 + len(reports) and contiguous(reports, "log")
    assert report_server.log_bytes() == b"x" * 100 and reports[-1]["result"] == _result()


def test_what_runs_meanwhile_fails_as_it_would_alone(tmp_path, report_server):
    config = LaunchConfig(job_id="j", attempt_id="a", attempt=1, server=report_server.url, command=["x"])
    rep = reporter_mod.Reporter(config, str(tmp_path / "log"), str(tmp_path / "metrics"), lambda: None)
    rep.started(1)

    def broken() -> None:
        raise OSError("disk full")

    try:
        rep.final_inline(_result(), broken)
    except OSError as e:
        assert "disk full" in str(e)
    else:
        raise AssertionError("the failure of what ran meanwhile was swallowed")
    dead = reporter_mod.Reporter(LaunchConfig(job_id="j", attempt_id="a", attempt=1, server=dead_url(), command=["x"]),
                                 str(tmp_path / "log"), str(tmp_path / "metrics"), lambda: None)
    dead.started(1)
    try:  # not sent at all: it runs before final_inline returns, and still raises
        dead.final_inline(_result(), broken)
    except OSError as e:
        assert "disk full" in str(e)
    else:
        raise AssertionError("the failure of what ran meanwhile was swallowed")
