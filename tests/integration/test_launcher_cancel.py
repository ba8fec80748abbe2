"""Stopping an attempt: SIGTERM to the launcher, or the server's cancel; nothing survives."""

from __future__ import annotations

import os
import signal
import time

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    log_of, make_config, pid_alive, read_result, report_server, script, start_launcher,
)
from tests.support.waiting import until

TREE = """
import os, signal, subprocess, sys, time
pids = sys.argv[1]
def record(pid):
    with open(pids, "a") as f:
        f.write(f"{pid}\\n")
record(os.getpid())
deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('child up', flush=True); time.sleep(60)"
child = subprocess.Popen([sys.executable, "-c", deaf])  # in the group, but deaf to SIGTERM
record(child.pid)
if os.fork() == 0:  # a daemon: new session, double fork, deaf to SIGTERM
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        record(os.getpid())
        time.sleep(60)
    os._exit(0)
while b"child up" not in open("../output.log", "rb").read():
    time.sleep(0.01)
while len(open(pids).read().split()) < 3:  # the daemon records itself on its own time, not before the child
    time.sleep(0.01)
print("ready", flush=True)
time.sleep(60)
"""


def start_tree(tmp_path, report_server, **kw):
    pids = tmp_path / "pids"
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, script(tmp_path, "tree.py", TREE) + [str(pids)], grace_period=0.5, **kw)
    proc = start_launcher(attempt)
    until(lambda: b"ready" in log_of(attempt))
    tree = [int(x) for x in pids.read_text().split()]
    assert len(tree) == 3 and all(pid_alive(p) for p in tree)
    return proc, attempt, tree


def test_sigterm_cancels_and_kills_the_whole_tree(tmp_path, report_server):
    proc, attempt, tree = start_tree(tmp_path, report_server)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)

    assert proc.returncode == 0
    result = read_result(attempt)
    assert result["reason"] == "Cancelled" and result["exit_code"] == -15
    assert time.monotonic() - start >= 0.5  # the deaf child got its grace period, then SIGKILL
    assert [p for p in tree if pid_alive(p)] == []
    assert report_server.final()["result"] == result


def test_server_cancel_reply_stops_the_attempt(tmp_path, report_server):
    proc, attempt, tree = start_tree(tmp_path, report_server)
    report_server.answer = lambda body: (200, {"cancel": True})
    proc.communicate(timeout=20)
    result = read_result(attempt)
    assert result["reason"] == "Cancelled"
    assert "server" in result["message"]
    assert [p for p in tree if pid_alive(p)] == []


def test_command_that_handles_sigterm_exits_within_grace(tmp_path, report_server):
    cmd = script(tmp_path, "job.py", """
import signal, sys, time
def bye(*a):
    print("saving checkpoint", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
print("ready", flush=True)
time.sleep(60)
""")
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, cmd, grace_period=30)
    proc = start_launcher(attempt)
    until(lambda: b"ready" in log_of(attempt))
    os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=20)  # less than the 30 s grace period: it did not sit it out
    result = read_result(attempt)
    assert result["reason"] == "Cancelled" and result["exit_code"] == 0
    assert "saving checkpoint" in report_server.log_bytes().decode()
