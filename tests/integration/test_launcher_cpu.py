"""A replica's cores: its tree in a cpu cgroup weighted by ``resources.cpu``, capped with the server's
``cpu_limit`` (real processes, real cgroups, the kernel's scheduler; launch.cpulimit), joined through the shim
and through a seat (launch.seat); their parent weighed as the node's cores.

Needs a writable cpu cgroup (root on cgroup v1, or a delegated v2 tree with cpu): skipped on a laptop without
one, required on CI. The jobs busy-loop for one fixed window of wall time, the same for every job of a test:
each prints the CPU time its processes took in it. Weights are compared on one core, where two jobs must
contend; the margins are wide, since the machine is shared.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import need
from tests.integration.test_launcher_seat import kept_after, zygote  # noqa: F401  (a fixture)
from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    ATTEMPT_ID, PYTHON, log_of, make_config, read_result, report_server, script, start_launcher,
)
from tests.support.waiting import until
from trainyard.launch import cgroup, cpulimit
from trainyard.launch.handoff import LEFT_NAME
from trainyard.launch.seat import AHEAD

WINDOW = 2.0  # seconds of busy loops
# waits for the go file (its window's start and end, wall clock), then busy-loops in N processes through the
# window and prints the CPU time they took; pinned to the core PIN names, where set
BUSY = """
import os, sys, time
if os.environ.get("PIN"):
    os.sched_setaffinity(0, {int(os.environ["PIN"])})
print("pid", os.getpid(), flush=True)
print(open("/proc/self/cgroup").read(), flush=True)
print("ready", flush=True)
give_up = time.time() + 120
while not os.path.exists(sys.argv[2]):
    if time.time() > give_up:
        sys.exit(2)
    time.sleep(0.01)
start, end = map(float, open(sys.argv[2]).read().split())
kids = []
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        while time.time() < start:
            time.sleep(0.001)
        while time.time() < end:
            pass
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
t = os.times()
print("cpu", t.children_user + t.children_system, flush=True)
"""


@pytest.fixture
def cpu_cgroups() -> str:
    mode = cpulimit.detect()
    need(mode is not None, "no writable cpu cgroup here (root on cgroup v1, or a delegated cgroup v2 tree with cpu)")
    return mode


def busy(tmp_path: Path, attempt: Path, url: str, procs: int, go: Path, **kw) -> None:
    make_config(attempt, url, [*script(tmp_path, "busy.py", BUSY), str(procs), str(go)], **kw)


def go_when_ready(go: Path, *attempts: Path) -> None:
    """Once every job is ready: one window for all, a moment ahead."""
    until(lambda: all(b"ready" in log_of(a) for a in attempts), timeout=60)
    start = time.time() + 0.3
    go.with_suffix(".tmp").write_text(f"{start} {start + WINDOW}")
    os.replace(go.with_suffix(".tmp"), go)


def cpu_time(attempt: Path) -> float:
    until(lambda: (attempt / "result.json").exists(), timeout=60)
    log = (attempt / "output.log").read_text()
    assert read_result(attempt)["reason"] == "Succeeded", log
    return float(re.search(r"^cpu (\S+)$", log, re.M).group(1))


def one_core() -> dict[str, str]:
    return {"PIN": str(min(os.sched_getaffinity(0)))}


def cpu_parent(mode: str) -> str:
    return cgroup.v1_parent(cgroup.MOUNT, "cpu") if mode == cgroup.V1 else os.path.join(cgroup.MOUNT, cgroup.PARENT)


def test_two_jobs_on_one_busy_core_share_it_as_their_cpu_asks(tmp_path, report_server, cpu_cgroups):
    # given two jobs of four busy processes each on one core, asking 1 and 3 cores, on a server with pids_max
    # (a group joined anyway: the weight rides along)
    small, big, go = tmp_path / "small", tmp_path / "big", tmp_path / "go"
    busy(tmp_path, small, report_server.url, 4, go, cpu=1.0, pids_max=64, env=one_core())
    busy(tmp_path, big, report_server.url, 4, go, cpu=3.0, pids_max=64, env=one_core(), replica=1)
    # when both run through the same window
    launchers = [start_launcher(small), start_launcher(big)]
    go_when_ready(go, small, big)
    for launcher in launchers:
        launcher.communicate(timeout=60)
    # then the core went 1:3 between them (as processes, four each, it would go 1:1)
    ratio = cpu_time(big) / cpu_time(small)
    assert 2.0 < ratio < 4.5, (cpu_time(small), cpu_time(big))
    assert in_cpu_group((big / "output.log").read_text(), f"{ATTEMPT_ID}-r1")
    assert not os.path.exists(os.path.join(cpu_parent(cpu_cgroups), f"{ATTEMPT_ID}-r0"))


def test_with_cpu_limit_a_job_uses_no_more_than_its_cores_on_an_idle_node(tmp_path, report_server, cpu_cgroups):
    # given a job asking half a core, with the server's cpu_limit on and no other group to join
    attempt, go = tmp_path / "capped", tmp_path / "go"
    busy(tmp_path, attempt, report_server.url, 2, go, cpu=0.5, cpu_limit=True)
    launcher = start_launcher(attempt)
    # when its two processes busy-loop on a node with two cores
    go_when_ready(go, attempt)
    launcher.communicate(timeout=60)
    # then they took half a core between them, not two
    assert 0.1 * WINDOW < cpu_time(attempt) < 0.6 * WINDOW
    assert not os.path.exists(os.path.join(cpu_parent(cpu_cgroups), f"{ATTEMPT_ID}-r0"))


def test_without_another_group_or_cpu_limit_a_job_joins_no_cpu_group(tmp_path, report_server, cpu_cgroups):
    attempt, go = tmp_path / "free", tmp_path / "go"
    busy(tmp_path, attempt, report_server.url, 0, go, cpu=1.0)
    launcher = start_launcher(attempt)
    go_when_ready(go, attempt)
    out = launcher.communicate(timeout=60)[0]
    assert cpu_time(attempt) == 0 and out == b""
    assert not in_cpu_group((attempt / "output.log").read_text(), f"{ATTEMPT_ID}-r0")  # a move: ~10 ms of its start


class OwnParent:
    """A parent of our cpu groups for one test alone. The host's, ``trainyard``, is every launcher's on the host:
    another test process's (another suite's on a shared machine) launchers and fixture wrote its weight between
    our launcher's write and our read (``1024`` read after the launch; two runs of this module at once do it).
    On v1 the launcher runs in a cpu group of the test's own, under which it makes its parent (as under any
    service's group); on v2 that group is the launch's ``cgroup_root``, with cpu and pids for its children."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        if mode == cgroup.V1:
            base = Path(cgroup.v1_parent(cgroup.MOUNT, "cpu")).parent
            self.top = base / f"{cgroup.PARENT}-cputest-{os.getpid()}"
            self.top.mkdir()
            self.root = None
        else:
            self.top = Path(cgroup.MOUNT, f"{cgroup.PARENT}-cputest-{os.getpid()}")
            self.top.mkdir()
            given = (self.top / "cgroup.controllers").read_text().split()
            (self.top / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in ("cpu", "pids") if c in given))
            self.root = str(self.top)
        self.parent = self.top / cgroup.PARENT
        self.parent.mkdir()
        self.weight = self.parent / ("cpu.shares" if mode == cgroup.V1 else "cpu.weight")

    def config(self) -> dict:
        return {} if self.root is None else {"cgroup_root": self.root}

    def start(self, attempt: Path) -> subprocess.Popen:
        if self.root is not None:
            return start_launcher(attempt)
        join = 'echo 0 > "$1" && shift && exec "$@"'
        return subprocess.Popen([cgroup.SHELL, "-c", join, "sh", str(self.top / "cgroup.procs"), PYTHON, "-m",
                                 "trainyard.launch", str(attempt)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def remove(self) -> None:
        for group in (self.parent, self.top):
            cgroup.sweep(str(group), stale_after=-60)  # a group its launcher left behind (none should be)
            assert cgroup.Group(str(group)).remove(), f"{group} still busy"


@pytest.fixture
def own_parent(cpu_cgroups: str):
    if cpu_cgroups == cgroup.V2 and cgroup.own_v2_path().startswith(f"/{cgroup.PARENT}/"):
        pytest.skip("a cgroup v2 tree delegated to us: its weight is its delegator's (unit-tested)")
    parent = OwnParent(cpu_cgroups)
    yield parent
    parent.remove()


def test_the_parent_of_the_jobs_cpu_groups_weighs_as_the_nodes_cores(tmp_path, report_server, own_parent):
    # given the parent of the jobs' cpu groups at the kernel's default: all of them together one core's worth
    # against any other busy group or process at its level
    assert own_parent.weight.read_text().strip() == ("1024" if own_parent.mode == cgroup.V1 else "100")
    # when a job runs in a cpu group (beside a pids group, as on a server with pids_max)
    attempt, go = tmp_path / "one", tmp_path / "go"
    busy(tmp_path, attempt, report_server.url, 0, go, cpu=1.0, pids_max=64, **own_parent.config())
    launcher = own_parent.start(attempt)
    go_when_ready(go, attempt)
    launcher.communicate(timeout=60)
    assert in_cpu_group((attempt / "output.log").read_text(), f"{ATTEMPT_ID}-r0")
    # then the parent weighs as the cores the node's jobs may run on (1024 shares a core, as kubepods; v2: that
    # mapped as Kubernetes maps it, never below the default)
    n = len(os.sched_getaffinity(0))
    shares = min(262144, 1024 * n)
    node = shares if own_parent.mode == cgroup.V1 else max(100, 1 + (shares - 2) * 9999 // 262142)
    assert own_parent.weight.read_text().strip() == str(node)


def test_a_parent_weight_someone_else_set_is_kept(tmp_path, report_server, own_parent):
    # given an admin's weight on the parent
    own_parent.weight.write_text("512" if own_parent.mode == cgroup.V1 else "50")
    # when a job runs in a cpu group
    attempt, go = tmp_path / "one", tmp_path / "go"
    busy(tmp_path, attempt, report_server.url, 0, go, cpu=1.0, cpu_limit=True, **own_parent.config())
    launcher = own_parent.start(attempt)
    go_when_ready(go, attempt)
    launcher.communicate(timeout=60)
    assert in_cpu_group((attempt / "output.log").read_text(), f"{ATTEMPT_ID}-r0")
    # then it is still the admin's
    assert own_parent.weight.read_text().strip() == ("512" if own_parent.mode == cgroup.V1 else "50")


def in_cpu_group(log: str, name: str) -> bool:
    """Whether the job's /proc/self/cgroup in ``log`` puts it in our cpu group ``name``."""
    return any(line.endswith(f"/{cgroup.PARENT}/{name}") and (line.startswith("0::") or "cpu" in
               line.split(":")[1].split(",")) for line in log.splitlines() if line.count(":") >= 2)


def seat_child(launcher: int, mode: str) -> int:
    """The seat's child of ``launcher``, once it is in its cpu group."""
    parent = cpu_parent(mode)

    def groups() -> list[list[int]]:
        return [cgroup.Group(os.path.join(parent, n)).pids() for n in os.listdir(parent)
                if n.startswith(f"{AHEAD}-{launcher}-")]
    until(lambda: [len(p) for p in groups()] == [1], timeout=30)
    return groups()[0][0]


def test_a_seated_job_gets_its_weight_even_with_no_other_group(tmp_path, report_server, zygote, cpu_cgroups):
    # given a launcher kept after an attempt with a pids limit: its seat holds a cpu group too
    launcher = kept_after(zygote, tmp_path / "first", report_server.url, pids_max=64, cpu=1.0)
    child = seat_child(launcher, cpu_cgroups)
    # when a job asking 3 cores and no pids limit takes the seat, beside one asking 1 through the shim,
    # both on one core
    big, small, go = tmp_path / "big", tmp_path / "small", tmp_path / "go"
    busy(tmp_path, big, report_server.url, 4, go, cpu=3.0, env=one_core())
    busy(tmp_path, small, report_server.url, 4, go, cpu=1.0, pids_max=64, env=one_core(), replica=1)
    shim = start_launcher(small)
    assert zygote.fork(big) == launcher
    go_when_ready(go, small, big)
    shim.communicate(timeout=60)
    until(lambda: (big / LEFT_NAME).exists(), timeout=60)
    # then it ran in the seat, in its cpu group, under its weight: the core went 3:1
    assert int((big / "output.log").read_text().split("pid ", 1)[1].split()[0]) == child
    assert in_cpu_group((big / "output.log").read_text(), f"{ATTEMPT_ID}-r0")
    ratio = cpu_time(big) / cpu_time(small)
    assert 2.0 < ratio < 4.5, (cpu_time(small), cpu_time(big))


def test_a_seated_job_is_capped_with_cpu_limit(tmp_path, report_server, zygote, cpu_cgroups):
    # given a launcher kept after an attempt under cpu_limit: its seat holds a cpu group, with no cap yet
    launcher = kept_after(zygote, tmp_path / "first", report_server.url, cpu=0.5, cpu_limit=True)
    child = seat_child(launcher, cpu_cgroups)
    attempt, go = tmp_path / "capped", tmp_path / "go"
    busy(tmp_path, attempt, report_server.url, 2, go, cpu=0.5, cpu_limit=True)
    assert zygote.fork(attempt) == launcher
    go_when_ready(go, attempt)
    until(lambda: (attempt / LEFT_NAME).exists(), timeout=60)
    # then it ran in the seat, held to half a core
    assert int((attempt / "output.log").read_text().split("pid ", 1)[1].split()[0]) == child
    assert 0.1 * WINDOW < cpu_time(attempt) < 0.6 * WINDOW
    assert not os.path.exists(os.path.join(cpu_parent(cpu_cgroups), f"{ATTEMPT_ID}-r0"))
    assert seat_child(launcher, cpu_cgroups) != child  # and the next seat waits in new ones
