"""A launcher that waits for its attempt seats the command in its cgroups ahead (launch.seat): real processes,
real cgroups, through ``python -m trainyard.launch.zygote``.

Needs writable memory and pids cgroups (root on cgroup v1, or a delegated v2 tree): skipped on a laptop
without them, required on CI.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest

from tests.conftest import need
from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    ATTEMPT_ID, PYTHON, make_config, read_result, report_server, run_launcher, script,
)
from tests.integration.test_launcher_zygote import Zygote, _one_waiting, _waiting
from tests.support.waiting import until
from trainyard.launch import cgroup, pidlimit
from trainyard.launch.handoff import LEFT_NAME
from trainyard.launch.seat import AHEAD

LIMIT = 100 << 20
UNKEPT = {"s3": {"endpoint_url": "http://127.0.0.1:9"}}  # an object store's options: its launcher is not kept
# prints its pid and its cgroups, then holds 30 MiB: under the limit
SHOW = """
import os
held = bytearray(30 << 20)
print("pid", os.getpid(), flush=True)
print(open("/proc/self/cgroup").read(), flush=True)
"""


@pytest.fixture
def both() -> str:
    mode = cgroup.detect()
    need(mode != cgroup.SAMPLED and pidlimit.detect() is not None,
         "no writable memory and pids cgroups here (root on cgroup v1, or a delegated cgroup v2 tree)")
    return mode


@pytest.fixture
def zygote():
    z = Zygote()
    yield z
    if z.proc.poll() is None:
        z.close()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def parents(mode: str) -> list[str]:
    if mode == cgroup.V1:
        return [cgroup.v1_parent(cgroup.MOUNT), cgroup.v1_parent(cgroup.MOUNT, "pids")]
    return [os.path.join(cgroup.MOUNT, cgroup.PARENT)]


def seats_of(launcher: int, mode: str) -> dict[str, list[int]]:
    """The seat groups of ``launcher`` (path -> the pids in it)."""
    found = {}
    for parent in parents(mode):
        for name in os.listdir(parent) if os.path.isdir(parent) else []:
            if name.startswith(f"{AHEAD}-{launcher}-"):
                found[os.path.join(parent, name)] = cgroup.Group(os.path.join(parent, name)).pids()
    return found


def seated(launcher: int, mode: str) -> int:
    """The one child of ``launcher`` that waits in all of its seat groups, once it is in them."""
    def one() -> bool:
        groups = seats_of(launcher, mode)
        return len(groups) == len(parents(mode)) and all(len(p) == 1 for p in groups.values()) \
            and len({p[0] for p in groups.values()}) == 1
    until(one, timeout=30)
    [[pid], *_] = seats_of(launcher, mode).values()
    assert psutil.Process(pid).ppid() == launcher
    return pid


def kept_after(zygote: Zygote, attempt: Path, url: str, **kw) -> int:
    """The pid of a launcher that ran one attempt (``true``, with ``kw``'s limits) and waits for the next."""
    make_config(attempt, url, ["true"], **kw)
    pid = zygote.fork(attempt)
    until(lambda: (attempt / LEFT_NAME).exists(), timeout=30)
    assert _one_waiting(zygote) == [pid]
    return pid


def shown(attempt: Path) -> tuple[int, str]:
    text = (attempt / "output.log").read_text()
    return int(text.split("pid ", 1)[1].split()[0]), text


def test_the_command_runs_in_the_child_that_joined_its_groups_while_the_launcher_waited(
        tmp_path, report_server, zygote, both):
    # given a launcher kept after an attempt with a memory limit and a pids limit
    launcher = kept_after(zygote, tmp_path / "first", report_server.url, memory_limit=LIMIT, pids_max=64)
    # then, while it waits, a child of its already sits in a memory and a pids group, with no limits yet
    child = seated(launcher, both)
    # when the next attempt, with limits of its own, comes
    second = tmp_path / "second"
    make_config(second, report_server.url, script(tmp_path, "show.py", SHOW), memory_limit=LIMIT, pids_max=50)
    assert zygote.fork(second) == launcher
    until(lambda: (second / LEFT_NAME).exists(), timeout=30)
    # then its command ran in that child, in the groups now named for the replica, and it succeeded
    result = read_result(second)
    assert result["reason"] == "Succeeded", result
    pid, text = shown(second)
    assert pid == child
    assert text.count(f"/{cgroup.PARENT}/{ATTEMPT_ID}-r0\n") == len(parents(both)), text
    # and the groups are gone, and the next seat waits in new ones
    for parent in parents(both):
        assert not os.path.exists(os.path.join(parent, f"{ATTEMPT_ID}-r0"))
    assert seated(launcher, both) != child


def test_a_seated_command_is_held_to_its_limits_as_one_joined_at_the_spawn(tmp_path, report_server, zygote, both):
    from tests.integration.test_launcher_cgroup import SPIKE, most_held
    from tests.integration.test_launcher_pids import FORKS, held

    launcher = kept_after(zygote, tmp_path / "first", report_server.url, memory_limit=LIMIT, pids_max=64)
    seated(launcher, both)
    # when a job bursts past its memory limit in the seat
    spike = tmp_path / "spike"
    make_config(spike, report_server.url, script(tmp_path, "spike.py", SPIKE), memory_limit=LIMIT, pids_max=64)
    assert zygote.fork(spike) == launcher
    until(lambda: (spike / LEFT_NAME).exists(), timeout=60)
    # then the kernel stopped it at the limit, and the launcher (outside the group) said so
    result = read_result(spike)
    assert result["reason"] == "OOMKilled" and result["exit_code"] == -9, result
    assert 0 < most_held((spike / "output.log").read_text()) < LIMIT >> 20
    # when the next forks past its pids limit in the next seat
    seated(launcher, both)
    bomb = tmp_path / "bomb"
    make_config(bomb, report_server.url, script(tmp_path, "forks.py", FORKS), memory_limit=LIMIT, pids_max=64)
    assert zygote.fork(bomb) == launcher
    until(lambda: (bomb / LEFT_NAME).exists(), timeout=60)
    # then the kernel refused its forks at the limit: the launcher counted none of its own
    result = read_result(bomb)
    log = (bomb / "output.log").read_text()
    assert result["reason"] == "Error(exit 3)" and held(log) == 63, (result, log)
    assert "pids limit of 64" in result["message"]


def test_an_attempt_that_needs_fewer_groups_runs_in_the_seat_and_one_that_needs_none_beside_it(
        tmp_path, report_server, zygote, both):
    launcher = kept_after(zygote, tmp_path / "first", report_server.url, memory_limit=LIMIT, pids_max=64)
    child = seated(launcher, both)
    # when an attempt with a pids limit only comes
    pids_only = tmp_path / "pids-only"
    make_config(pids_only, report_server.url, script(tmp_path, "show.py", SHOW), pids_max=64)
    assert zygote.fork(pids_only) == launcher
    until(lambda: (pids_only / LEFT_NAME).exists(), timeout=30)
    # then it ran in the seat, and every group of it is gone after (the one it did not need too)
    assert read_result(pids_only)["reason"] == "Succeeded"
    assert shown(pids_only)[0] == child
    for parent in parents(both):
        assert not os.path.exists(os.path.join(parent, f"{ATTEMPT_ID}-r0"))
    # when one with no limit at all comes (a seat like its attempt before's: a pids group)
    child = seated_pids_only = _seat_child(launcher, both)
    free = tmp_path / "free"
    make_config(free, report_server.url, script(tmp_path, "show.py", SHOW))
    assert zygote.fork(free) == launcher
    until(lambda: (free / LEFT_NAME).exists(), timeout=30)
    # then it ran outside any group of ours, and the seat is gone
    pid, text = shown(free)
    assert read_result(free)["reason"] == "Succeeded" and pid != seated_pids_only
    assert f"/{cgroup.PARENT}/" not in text
    assert gone(child)
    assert seats_of(launcher, both) == {}


def _seat_child(launcher: int, mode: str) -> int:
    def one() -> bool:
        groups = seats_of(launcher, mode)
        return bool(groups) and all(len(p) == 1 for p in groups.values())
    until(one, timeout=30)
    return next(iter(seats_of(launcher, mode).values()))[0]


def test_a_missing_command_in_the_seat_is_still_setup_failed(tmp_path, report_server, zygote, both):
    launcher = kept_after(zygote, tmp_path / "first", report_server.url, pids_max=64)
    _seat_child(launcher, both)
    second = tmp_path / "second"
    make_config(second, report_server.url, ["no-such-command-here"], pids_max=64)
    assert zygote.fork(second) == launcher
    until(lambda: (second / "result.json").exists(), timeout=30)
    result = read_result(second)
    assert result["reason"] == "SetupFailed" and "No such file" in result["message"], result
    until(lambda: all(not os.path.exists(os.path.join(p, f"{ATTEMPT_ID}-r0")) for p in parents(both)), timeout=10)


def test_a_launcher_let_go_or_killed_while_it_waits_leaves_no_child_and_no_busy_group(
        tmp_path, report_server, zygote, both):
    # given a launcher forked ahead (its attempt before could not be kept) with a seat
    first = tmp_path / "first"
    make_config(first, report_server.url, ["true"], pids_max=64, storage=UNKEPT)
    done = zygote.fork(first)
    until(lambda: (first / "result.json").exists() and done not in _waiting(zygote), timeout=30)
    [ahead] = _one_waiting(zygote)
    child = _seat_child(ahead, both)
    groups = list(seats_of(ahead, both))
    # when it is killed: its child goes with it, and its groups, empty, are left to the sweep
    os.kill(ahead, signal.SIGKILL)
    until(lambda: gone(child), timeout=10)
    until(lambda: all(cgroup.Group(g).pids() == [] for g in groups), timeout=10)
    for group in groups:
        os.rmdir(group)  # what the sweep does to it once it is old: refused while it holds a process
    # given the next launcher forked ahead (after the next attempt), when the zygote lets it go (EOF)
    second = tmp_path / "second"
    make_config(second, report_server.url, ["true"], pids_max=64, storage=UNKEPT)
    done = zygote.fork(second)
    until(lambda: (second / "result.json").exists() and done not in _waiting(zygote), timeout=30)
    [ahead] = _one_waiting(zygote)
    child = _seat_child(ahead, both)
    groups = list(seats_of(ahead, both))
    zygote.close()
    # then its child is gone and so are its groups
    until(lambda: gone(ahead) and gone(child), timeout=30)
    assert not any(os.path.exists(g) for g in groups)


def test_a_seated_command_gets_its_env_cwd_and_fds_as_a_spawned_one_would(tmp_path, report_server, zygote, both):
    launcher = kept_after(zygote, tmp_path / "first", report_server.url, pids_max=64)
    child = _seat_child(launcher, both)
    second = tmp_path / "second"
    odd = "it's $HOME `x` \"q\"\nline two"
    job = script(tmp_path, "env.py", """
import os, signal
print("pid", os.getpid())
print("odd", repr(os.environ["ODD"]))
print("cwd", os.getcwd())
print("fds", sorted(int(f) for f in os.listdir("/proc/self/fd")))
print("sigint", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
print("blocked", sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
print("session", os.getsid(0) == os.getpid())
print("keys", sorted(os.environ))
""")
    make_config(second, report_server.url, job, pids_max=64, env={"ODD": odd})
    assert zygote.fork(second) == launcher
    until(lambda: (second / LEFT_NAME).exists(), timeout=30)
    pid, text = shown(second)
    assert pid == child and read_result(second)["reason"] == "Succeeded", text
    assert f"odd {odd!r}" in text and f"cwd {second / 'work'}" in text, text
    # stdin, stdout, stderr and the listing's own fd only; SIGINT at Python's default; nothing blocked; its session
    assert "fds [0, 1, 2, 3]" in text and "sigint True" in text and "blocked []" in text and "session True" in text
    # and its environment is the one a launcher of its own gives it: none of the shell's own variables
    alone = tmp_path / "alone"
    make_config(alone, report_server.url, job, pids_max=64, env={"ODD": odd})
    assert run_launcher(alone)["reason"] == "Succeeded"
    keys = [line for line in text.splitlines() if line.startswith("keys ")]
    assert keys == [line for line in shown(alone)[1].splitlines() if line.startswith("keys ")], text


def test_a_seated_command_gets_its_own_optind(tmp_path, report_server, zygote, both):
    # the seat's shell is dash: it would set an exported OPTIND to 1, and refuse one that is not a number
    job = script(tmp_path, "optind.py", """
import os
print("pid", os.getpid())
print("OPTIND", repr(os.environ.get("OPTIND")))
""")
    launcher = kept_after(zygote, tmp_path / "first", report_server.url, pids_max=64)
    for value in ("5", "abc"):
        # given a launcher with a seat, when an attempt whose env sets OPTIND comes
        child = _seat_child(launcher, both)
        attempt = tmp_path / f"optind-{value}"
        make_config(attempt, report_server.url, job, pids_max=64, env={"OPTIND": value})
        assert zygote.fork(attempt) == launcher
        until(lambda: (attempt / LEFT_NAME).exists(), timeout=30)
        # then its command ran in the seat and saw exactly its own OPTIND
        log = (attempt / "output.log").read_text()
        assert read_result(attempt)["reason"] == "Succeeded", log  # a refused OPTIND: dash's exit 2
        assert shown(attempt)[0] == child and f"OPTIND {value!r}\n" in log, log
