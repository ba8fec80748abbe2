"""A replica's process limit: its whole tree in a pids cgroup the kernel enforces (real processes, real cgroups).

Needs a writable pids cgroup (root on cgroup v1, or a delegated v2 tree): skipped on a laptop without one,
required on CI. The jobs here fork a bounded number of processes, never without end, so that a launcher
that failed to set the limit fails its test without harming the machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import need
from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    ATTEMPT_ID, log_of, make_config, read_result, report_server, run_launcher, script, start_launcher,
)
from tests.support.waiting import until
from trainyard.launch import cgroup, pidlimit

LIMIT = 64
# Tries to hold 200 processes at once: each child waits on a pipe until its parent closes it. Prints how
# many it held, and exits 0 only if it held them all (a job that does not check its forks).
FORKS = """
import os, sys
r, w = os.pipe()
held = []
for i in range(200):
    try:
        pid = os.fork()
    except BlockingIOError as e:  # EAGAIN: the limit
        print("fork failed:", e, flush=True)
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    held.append(pid)
print("held", len(held), flush=True)
os.close(w)
for pid in held:
    os.waitpid(pid, 0)
sys.exit(0 if len(held) == 200 else 3)
"""


@pytest.fixture
def pids_cgroups() -> str:
    mode = pidlimit.detect()
    need(mode is not None, "no writable pids cgroup here (root on cgroup v1, or a delegated cgroup v2 tree)")
    return mode


def group_path(mode: str, replica: int = 0) -> str:
    """Where the launcher makes the pids group of make_config's attempt."""
    parent = cgroup.v1_parent(cgroup.MOUNT, "pids") if mode == cgroup.V1 else os.path.join(cgroup.MOUNT, cgroup.PARENT)
    return os.path.join(parent, f"{ATTEMPT_ID}-r{replica}")


def held(log: str) -> int:
    return int(re.search(r"^held (\d+)$", log, re.M).group(1))


def test_a_job_that_forks_past_its_limit_fails_to_and_the_server_and_other_jobs_are_unharmed(
        tmp_path, report_server, pids_cgroups):
    # given a job limited to 64 processes that tries to hold 200, and beside it a job with room for them
    bomb, other = tmp_path / "bomb", tmp_path / "other"
    make_config(bomb, report_server.url, script(tmp_path, "forks.py", FORKS), pids_max=LIMIT)
    make_config(other, report_server.url, script(tmp_path, "forks.py", FORKS), pids_max=1000, replica=1)
    # when both run at once
    launchers = [start_launcher(bomb), start_launcher(other)]
    outs = [p.communicate(timeout=120)[0] for p in launchers]
    assert [p.returncode for p in launchers] == [0, 0], outs
    # then the kernel refused its forks at the limit (the launcher, outside the group, counted none of them),
    # and its end says why it failed
    result, log = read_result(bomb), (bomb / "output.log").read_text()
    assert "fork failed: [Errno 11]" in log and 0 < held(log) < LIMIT, log
    assert result["reason"] == "Error(exit 3)", result
    assert f"pids limit of {LIMIT} processes was reached ({pids_cgroups}" in result["message"], result
    assert result["message"] in log
    # the other job held all of its 200, and the server (this process) still starts processes
    assert read_result(other)["reason"] == "Succeeded" and held((other / "output.log").read_text()) == 200
    assert subprocess.run(["true"]).returncode == 0 and report_server.final() is not None
    assert not os.path.exists(group_path(pids_cgroups)) and not os.path.exists(group_path(pids_cgroups, 1))


def test_the_command_and_its_children_are_in_the_group_and_the_launcher_is_not(tmp_path, report_server,
                                                                                pids_cgroups):
    attempt = tmp_path / "attempt"
    job = script(tmp_path, "job.py", """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
print("child", child.pid, flush=True)
time.sleep(30)
""")
    make_config(attempt, report_server.url, job, pids_max=LIMIT)
    launcher = start_launcher(attempt)
    try:
        until(lambda: b"child" in log_of(attempt))
        child = int(log_of(attempt).split()[1])
        members = {int(p) for p in open(os.path.join(group_path(pids_cgroups), "cgroup.procs")).read().split()}
        assert child in members and launcher.pid not in members
        assert open(os.path.join(group_path(pids_cgroups), "pids.max")).read().strip() == str(LIMIT)
        # recorded for the engine, should the launcher die: the group's members are killed with the rest
        recorded = (attempt / "command.json").read_text()
        assert group_path(pids_cgroups) in recorded
    finally:
        launcher.terminate()
        launcher.communicate(timeout=30)
    assert not os.path.exists(group_path(pids_cgroups))


def test_with_the_limit_off_no_group_is_made_and_the_job_forks_freely(tmp_path, report_server, pids_cgroups):
    attempt = tmp_path / "attempt"
    job = script(tmp_path, "job.py", FORKS.replace("held = []", "print(open('/proc/self/cgroup').read())\nheld = []"))
    make_config(attempt, report_server.url, job, pids_max=0)
    result = run_launcher(attempt)
    log = (attempt / "output.log").read_text()
    assert result["reason"] == "Succeeded" and held(log) == 200, log
    assert f"/{cgroup.PARENT}/{ATTEMPT_ID}-r0" not in log  # in no group of ours


def test_without_a_pids_controller_the_launcher_says_so_once_and_the_job_runs(tmp_path, report_server):
    # a folder that has no cgroups stands for a host without them
    (tmp_path / "no-cgroups").mkdir()
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, ["sh", "-c", "echo ran"], pids_max=LIMIT,
                cgroup_root=str(tmp_path / "no-cgroups"))
    proc = start_launcher(attempt)
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0 and read_result(attempt)["reason"] == "Succeeded"
    assert out.count("no usable pids cgroup here") == 1 and f"limit of {LIMIT} processes" in out, out
    assert "pids" not in (attempt / "output.log").read_text()  # the job's own log is the job's


def test_an_account_cannot_raise_its_own_limit_nor_leave_the_group(report_server, pids_cgroups):
    need(os.geteuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv to switch accounts")
    root = Path(tempfile.mkdtemp(prefix="trainyard-pids-"))
    os.chmod(root, 0o711)
    try:
        attempt = root / "attempt"
        group = group_path(pids_cgroups)
        top = os.path.dirname(os.path.dirname(group))  # a group above ours: leaving for it would drop the limit
        tries = (f'echo 100000 > {group}/pids.max && echo raised; echo $$ > {top}/cgroup.procs && echo left; '
                 f'cat {group}/pids.max')
        make_config(attempt, report_server.url, ["/bin/sh", "-c", tries], pids_max=LIMIT,
                    run_as={"uid": 65534, "gid": 65534, "name": "nobody"})
        os.chmod(attempt, 0o711)
        result = run_launcher(attempt)
        log = (attempt / "output.log").read_text()
        assert result["reason"] == "Succeeded", log
        assert "raised" not in log and "left" not in log and f"\n{LIMIT}\n" in f"\n{log}", log
        assert log.count("Permission denied") == 2, log
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert not os.path.exists(group_path(pids_cgroups))


def test_a_command_beside_the_job_is_inside_its_pids_group(tmp_path, report_server, pids_cgroups):
    from tests.integration.test_launcher_requests import answered

    asks = [{"id": 1, "argv": ["cat", "/proc/self/cgroup"], "timeout": 10}]
    report_server.answer = lambda body: (200, {"cancel": False,
                                               "execs": asks if body.get("phase") == "running" else []})
    _, got = answered(tmp_path, report_server, "execs", 1, pids_max=LIMIT)
    assert got[1]["exit_code"] == 0 and f"/{cgroup.PARENT}/{ATTEMPT_ID}-r0\n" in got[1]["output"], got[1]
    assert not os.path.exists(group_path(pids_cgroups))
