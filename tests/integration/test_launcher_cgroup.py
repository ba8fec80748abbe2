"""The memory limit as a hard limit: each replica in its own memory cgroup (real processes, real cgroups).

Needs a writable memory cgroup (root on cgroup v1, or a delegated v2 tree):
skipped on a laptop without one, required on CI.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from tests.conftest import need
from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    ATTEMPT_ID, PYTHON, log_of, make_config, report_server, run_launcher, script, start_launcher,
)
from tests.support.waiting import until
from trainyard.engines.detect import local_node
from trainyard.launch import cgroup

LIMIT = 100 << 20
# About 500 MB in a fast burst of 10 MiB pieces, each touched (bytearray zero-fills),
# held 0.2 s, then exit 0. It prints how far it got, so a test sees whether the
# job ever held more than its limit, not only whether it was stopped at some point.
SPIKE = """
import time
held = []
for i in range(50):
    held.append(bytearray(10 << 20))
    print("held", len(held) * 10, flush=True)
time.sleep(2)  # longer than the sampled limit's 0.5 s between looks (a cgroup kills it while it allocates)
"""


@pytest.fixture
def cgroups() -> str:
    mode = cgroup.detect()
    need(mode != cgroup.SAMPLED, "no writable memory cgroup here (root on cgroup v1, or a delegated cgroup v2 tree)")
    return mode


def group_path(mode: str) -> str:
    """Where the launcher makes the group of make_config's attempt (replica 0)."""
    parent = cgroup.v1_parent(cgroup.MOUNT) if mode == cgroup.V1 else os.path.join(cgroup.MOUNT, cgroup.PARENT)
    return os.path.join(parent, f"{ATTEMPT_ID}-r0")


def most_held(log: str) -> int:
    return max((int(n) for n in re.findall(r"^held (\d+)$", log, re.M)), default=0)


@pytest.mark.parametrize("run", range(5))
def test_a_fast_spike_past_the_limit_is_stopped_at_the_limit(tmp_path, report_server, cgroups, run):
    # given a job that bursts to ~500 MB under a 100 MiB limit
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, script(tmp_path, "spike.py", SPIKE), memory_limit=LIMIT)
    # when it runs
    result = run_launcher(attempt)
    # then the kernel stopped it before it ever held more than its limit, and the launcher says so
    log = (attempt / "output.log").read_text()
    assert result["reason"] == "OOMKilled" and result["exit_code"] == -9, result
    assert 0 < most_held(log) < LIMIT >> 20, f"held {most_held(log)} MiB under a limit of {LIMIT >> 20} MiB"
    assert "limit" in result["message"] and cgroups in result["message"]
    assert not os.path.exists(group_path(cgroups))


def test_a_job_under_its_limit_succeeds_inside_its_group_and_the_group_is_removed(tmp_path, report_server, cgroups):
    attempt = tmp_path / "attempt"
    job = script(tmp_path, "job.py", """
held = bytearray(30 << 20)
print(open("/proc/self/cgroup").read(), flush=True)
""")
    make_config(attempt, report_server.url, job, memory_limit=LIMIT)
    result = run_launcher(attempt)
    assert result["reason"] == "Succeeded", (attempt / "output.log").read_text()
    assert f"/{cgroup.PARENT}/{ATTEMPT_ID}-r0\n" in (attempt / "output.log").read_text()
    assert not os.path.exists(group_path(cgroups))


def test_the_launcher_stays_outside_the_group_its_command_and_children_are_inside(tmp_path, report_server, cgroups):
    attempt = tmp_path / "attempt"
    job = script(tmp_path, "job.py", """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
print("child", child.pid, flush=True)
time.sleep(30)
""")
    make_config(attempt, report_server.url, job, memory_limit=LIMIT)
    launcher = start_launcher(attempt)
    try:
        until(lambda: b"child" in log_of(attempt))
        child = int(log_of(attempt).split()[1])
        procs_file = os.path.join(group_path(cgroups), "cgroup.procs")
        members = {int(p) for p in open(procs_file).read().split()}
        assert child in members and launcher.pid not in members
        assert f"/{cgroup.PARENT}/" not in open(f"/proc/{launcher.pid}/cgroup").read()
    finally:
        launcher.terminate()
        launcher.communicate(timeout=30)
    assert not os.path.exists(group_path(cgroups))


def test_an_oom_kill_of_a_child_ends_the_whole_tree(tmp_path, report_server, cgroups):
    # cgroup v1 kills one process (the biggest); the replica still ends, whole, as OOMKilled
    attempt = tmp_path / "attempt"
    job = script(tmp_path, "job.py", """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "b = bytearray(300 << 20)"])
time.sleep(30)
""")
    make_config(attempt, report_server.url, job, memory_limit=LIMIT)
    start = time.monotonic()
    result = run_launcher(attempt)
    assert result["reason"] == "OOMKilled" and result["exit_code"] == -9
    assert time.monotonic() - start < 10
    assert not os.path.exists(group_path(cgroups))


def test_a_missing_command_is_still_setup_failed_behind_the_shim(tmp_path, report_server, cgroups):
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, ["no-such-command-xyz"], memory_limit=LIMIT)
    result = run_launcher(attempt)
    assert result["reason"] == "SetupFailed" and result["exit_code"] is None
    assert "no-such-command-xyz" in result["message"]
    assert not os.path.exists(group_path(cgroups))


def test_without_cgroups_the_limit_is_sampled(tmp_path, report_server):
    # given a host with no cgroups (a folder that has none stands for its mount point)
    attempt = tmp_path / "attempt"
    (tmp_path / "no-cgroups").mkdir()
    make_config(attempt, report_server.url, script(tmp_path, "spike.py", SPIKE), memory_limit=LIMIT,
                cgroup_root=str(tmp_path / "no-cgroups"))
    # then the launcher's sampling still stops the job, after the fact
    result = run_launcher(attempt)
    assert result["reason"] == "OOMKilled" and result["exit_code"] == -9
    assert "passed the limit" in result["message"]


def test_empty_groups_of_dead_launchers_are_swept_and_busy_ones_kept(cgroups):
    # a private parent, so that no running launcher's group is in reach
    base = os.path.join(cgroup.MOUNT, "memory") if cgroups == cgroup.V1 else cgroup.MOUNT
    parent = os.path.join(base, f"{cgroup.PARENT}-test-{os.getpid()}")
    os.makedirs(os.path.join(parent, "dead-r0"))
    busy = cgroup.MemoryGroup(os.path.join(parent, "busy-r0"), cgroups, LIMIT)
    os.mkdir(busy.path)
    sleeper = subprocess.Popen(busy.wrap(["sleep", "30"]))
    try:
        until(lambda: busy.pids() == [sleeper.pid])
        # any age: a group's mtime comes from the kernel's coarse clock, which this VM's can set a moment ahead of
        # time.time() (CI saw "0 == 1" with stale_after=0)
        assert cgroup.sweep(parent, stale_after=-60) == 1
        assert sorted(e.name for e in os.scandir(parent) if e.is_dir()) == ["busy-r0"]
    finally:
        sleeper.kill()
        sleeper.wait()
        assert busy.remove()
        os.rmdir(parent)


def test_this_node_reports_how_it_enforces_memory(cgroups):
    assert local_node(cpus=1, memory=1 << 30, gpus=0).memory_enforcement == cgroups


def test_a_command_run_beside_the_job_is_inside_its_group_and_counted_against_its_limit(tmp_path, report_server,
                                                                                           cgroups):
    from tests.integration.test_launcher_requests import answered

    asks = [{"id": 1, "argv": ["cat", "/proc/self/cgroup"], "timeout": 10},
            {"id": 2, "argv": ["no-such-program-here"], "timeout": 10}]
    report_server.answer = lambda body: (200, {"cancel": False,
                                               "execs": asks if body.get("phase") == "running" else []})

    _, got = answered(tmp_path, report_server, "execs", 2, memory_limit=LIMIT)

    assert got[1]["exit_code"] == 0 and f"/{cgroup.PARENT}/{ATTEMPT_ID}-r0\n" in got[1]["output"], got[1]
    assert got[2]["exit_code"] is None and got[2]["error"].startswith("cannot run 'no-such-program-here': ")
    assert not os.path.exists(group_path(cgroups))


def test_a_command_beside_the_job_past_its_limit_is_stopped_by_the_kernel(tmp_path, cgroups):
    from tests.integration.test_launcher_requests import beside
    from trainyard.launch import execs

    parent = cgroup.v1_parent(cgroup.MOUNT) if cgroups == cgroup.V1 else os.path.join(cgroup.MOUNT, cgroup.PARENT)
    group = cgroup.MemoryGroup.make(cgroup.MOUNT, cgroups, f"exec-test-{os.getpid()}-r0", LIMIT)
    try:
        hog = execs.run([PYTHON, "-c", "b = bytearray(400 << 20); print('survived')"], 30, beside(tmp_path, group))
        kills = group.oom_kills()
        calm = execs.run(["echo", "fine"], 10, beside(tmp_path, group))
    finally:
        removed = group.remove()
    assert hog["exit_code"] == -9 and kills and "survived" not in hog["output"], hog
    assert (calm["exit_code"], calm["output"]) == (0, "fine\n")
    assert removed and not os.path.exists(os.path.join(parent, f"exec-test-{os.getpid()}-r0"))


# its own OPTIND as the command sees it; dash and bash set an inherited one to 1, dash refuses one not a number
SHOW_OPTIND = f"""#!{PYTHON}
import os, sys
print("argv", sys.argv[1:], "OPTIND", repr(os.environ.get("OPTIND")), flush=True)
"""


@pytest.mark.parametrize("value", ["5", "abc", ""])
@pytest.mark.parametrize("name", ["show.py", "show=optind.py"])  # a name with "=" is one more assignment to env(1)
def test_a_command_behind_the_shim_gets_its_own_optind(tmp_path, report_server, cgroups, value, name):
    # given a job whose env sets OPTIND, with a memory limit (so its command joins its group through the shim)
    program = tmp_path / "bin" / name
    program.parent.mkdir()
    program.write_text(SHOW_OPTIND)
    program.chmod(0o755)
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, [name, "-x"], memory_limit=LIMIT,
                env={"OPTIND": value, "PATH": f"{program.parent}:{os.environ['PATH']}"})
    # when it runs
    result = run_launcher(attempt)
    # then it ran in its group and saw exactly its own OPTIND
    log = (attempt / "output.log").read_text()
    assert result["reason"] == "Succeeded", (result, log)
    assert f"argv ['-x'] OPTIND {value!r}\n" in log, log
    assert not os.path.exists(group_path(cgroups))


@pytest.mark.parametrize("value", ["5", "abc"])
def test_a_command_run_beside_the_job_behind_the_shim_gets_its_optind(tmp_path, cgroups, value):
    from trainyard.launch import execs

    group = cgroup.MemoryGroup.make(cgroup.MOUNT, cgroups, f"exec-optind-{os.getpid()}-r0", LIMIT)
    try:
        where = (None, None, str(tmp_path), {"PATH": "/usr/bin:/bin", "OPTIND": value}, (group,), None)
        got = execs.run([PYTHON, "-c", "import os; print(repr(os.environ.get('OPTIND')))"], 30, where)
    finally:
        group.remove()
    assert (got["exit_code"], got["output"]) == (0, f"{value!r}\n"), got
