"""A replica opens only the GPUs it was given (launch.devices): real processes, a real devices cgroup (v1) or
device program (v2), the kernel's own check, through the shim and through a seat (launch.seat).

There is no GPU here: the node's "GPUs" are device files we make (character major 195, as the NVIDIA driver's)
in a folder the launch config names as its ``dev_root``. Opening one the group denies fails with EPERM at the
cgroup check; one it allows gets past it and fails with ENXIO (no driver behind it). That difference is the test.

The GPUs' minor numbers come from NVML (launch.devices.minors): the launchers load a fake ``libnvidia-ml.so.1``
(tests/support/fake_nvml.c, built with gcc) through the real pynvml binding, which numbers the fake node's GPUs
as each test says (by default index N is minor N), whatever NVML this machine has.

Needs root (mknod, a group in the v1 devices controller, a v2 group with a BPF program: the hierarchy's root on
a v2 host, its ``unified`` mount on a hybrid one): skipped on a laptop without, required on CI.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import need
from tests.support.fake_nvml import env as nvml_env
from tests.support.fake_nvml import fake_nvml_lib  # noqa: F401  (a fixture)
from tests.integration.test_launcher_seat import UNKEPT, kept_after, zygote  # noqa: F401  (a fixture)
from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    ATTEMPT_ID, make_config, read_result, report_server, run_launcher, script, start_launcher,
)
from tests.integration.test_launcher_zygote import Zygote, _one_waiting, _waiting
from tests.support.waiting import until
from trainyard.launch import cgroup, devices
from trainyard.launch.config import LaunchConfig
from trainyard.launch.handoff import LEFT_NAME
from trainyard.launch.seat import AHEAD, Wants, wants

GPUS = 4
FILES = [f"nvidia{n}" for n in range(GPUS)] + ["nvidiactl"]
# prints its pid, its cgroups, then how opening each of the node's device files went: "name ok" or "name ERRNO"
PROBE = """
import errno, os, sys
print("pid", os.getpid(), flush=True)
print(open("/proc/self/cgroup").read(), flush=True)
for name in sys.argv[2:]:
    try:
        os.close(os.open(os.path.join(sys.argv[1], name), os.O_RDWR))
        print("open", name, "ok", flush=True)
    except OSError as e:
        print("open", name, errno.errorcode[e.errno], flush=True)
"""


@pytest.fixture(autouse=True)
def nvml(monkeypatch, fake_nvml_lib) -> Path:  # noqa: F811
    """Every process a test starts loads the fake NVML, with minor N for index N; this one knows the same."""
    for key, value in nvml_env(fake_nvml_lib, list(range(GPUS))).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(devices, "_known", {str(n): n for n in range(GPUS)})
    return fake_nvml_lib


class Fence(NamedTuple):
    """Where a test's replicas get their devices group: the launch config's ``cgroup_root``, and what it is."""

    root: str
    version: str

    def parent(self) -> str:
        return cgroup.place(self.root, self.version, "devices")


@pytest.fixture(params=[cgroup.V1, cgroup.V2])
def fence(request) -> Fence:
    need(os.geteuid() == 0, "device files are made with mknod, and devices groups by root")
    if request.param == cgroup.V1:
        need(devices.detect() == cgroup.V1, "no usable cgroup v1 devices controller here")
        return Fence(cgroup.MOUNT, cgroup.V1)
    v2 = next((r for r in (cgroup.MOUNT, os.path.join(cgroup.MOUNT, "unified")) if devices.detect(r) == cgroup.V2
               or devices.detect(r) is None and os.path.isfile(os.path.join(r, "cgroup.controllers"))), None)
    need(v2 is not None, "no cgroup v2 hierarchy here (a v2 host's root, or a hybrid host's unified mount)")
    assert devices.detect(v2) == cgroup.V2, f"root, yet no device program can be attached under {v2}"
    return Fence(v2, cgroup.V2)


@pytest.fixture
def gpu_node(tmp_path) -> Path:
    """A folder laid out as a GPU node's /dev: four GPUs and the driver's control file."""
    need(os.geteuid() == 0, "device files are made with mknod")
    dev = tmp_path / "dev"
    dev.mkdir()
    for n in range(GPUS):
        os.mknod(dev / f"nvidia{n}", 0o666 | stat.S_IFCHR, os.makedev(devices.MAJOR, n))
    os.mknod(dev / "nvidiactl", 0o666 | stat.S_IFCHR, os.makedev(devices.MAJOR, 255))
    os.mknod(dev / "nvidia-uvm", 0o666 | stat.S_IFCHR, os.makedev(511, 0))  # a major of its own
    (dev / "nvidia-caps").mkdir()
    return dev


def probe(tmp_path: Path, attempt: Path, url: str, dev: Path, fence: Fence, **kw) -> None:
    make_config(attempt, url, [*script(tmp_path, "probe.py", PROBE), str(dev), *FILES], dev_root=str(dev),
                cgroup_root=fence.root, **kw)


def opened(attempt: Path) -> dict[str, str]:
    """How opening each device file went in the job: name -> "ok" or the errno's name."""
    lines = (attempt / "output.log").read_text().splitlines()
    return {p[1]: p[2] for p in (line.split() for line in lines) if len(p) == 3 and p[0] == "open"}


def allowed(outcome: str) -> bool:
    """Past the cgroup's check: no driver behind a fake node, so the open fails further on (or succeeds)."""
    return outcome in ("ok", errno.errorcode[errno.ENXIO], errno.errorcode[errno.ENODEV])


def devices_group(attempt: Path, fence: Fence) -> str | None:
    """The name of our group the job's devices hierarchy (v1's, or v2's one) put it in, from its /proc/self/cgroup."""
    hierarchy = "devices" if fence.version == cgroup.V1 else ""
    for line in (attempt / "output.log").read_text().splitlines():
        if line.count(":") >= 2 and line.split(":")[1] == hierarchy and f"/{cgroup.PARENT}/" in line:
            return line.rsplit("/", 1)[1]
    return None


def test_the_node_gpus_are_its_nvidia_device_files_of_the_drivers_major(gpu_node):
    assert devices.node_gpus(str(gpu_node)) == [0, 1, 2, 3]
    os.unlink(gpu_node / "nvidiactl")  # no driver loaded: not even looked for
    assert devices.node_gpus(str(gpu_node)) == []


def test_a_job_opens_its_own_gpus_and_not_the_nodes_others(tmp_path, report_server, gpu_node, fence):
    # given a node of four GPUs and a job given GPUs 1 and 2
    attempt = tmp_path / "a"
    probe(tmp_path, attempt, report_server.url, gpu_node, fence, gpus=["1", "2"])
    # when it runs (through the shim: no memory or pids limit, no seat)
    result = run_launcher(attempt)
    # then the kernel let it open its own and the driver's control file, and refused it the others
    assert result["reason"] == "Succeeded", result
    got = opened(attempt)
    assert got["nvidia0"] == got["nvidia3"] == "EPERM", got
    assert allowed(got["nvidia1"]) and allowed(got["nvidia2"]) and allowed(got["nvidiactl"]), got
    assert devices_group(attempt, fence) == f"{ATTEMPT_ID}-r0"
    # and its group is gone after
    assert not os.path.exists(os.path.join(fence.parent(), f"{ATTEMPT_ID}-r0"))


@pytest.mark.parametrize("gpu", ["0", "GPU-fake-0"])  # its NVML index, or its UUID (as Ray may hand it out)
def test_a_job_opens_the_device_file_nvml_says_is_its_gpus_not_the_one_of_its_index(
        tmp_path, monkeypatch, report_server, gpu_node, fence, nvml, gpu):
    # given a node whose driver numbered its device files out of PCI order: GPU 0 is /dev/nvidia3, GPU 3 nvidia0
    log = tmp_path / "nvml.log"
    for key, value in nvml_env(nvml, [3, 1, 2, 0], log).items():
        monkeypatch.setenv(key, value)
    # when a job given GPU 0 runs
    attempt = tmp_path / "a"
    probe(tmp_path, attempt, report_server.url, gpu_node, fence, gpus=[gpu])
    result = run_launcher(attempt)
    # then it may open nvidia3 (past the cgroup: ENXIO, no driver) and not nvidia0, another job's GPU
    assert result["reason"] == "Succeeded", result
    got = opened(attempt)
    assert [got[f"nvidia{n}"] for n in range(3)] == ["EPERM"] * 3, got
    assert allowed(got["nvidia3"]) and allowed(got["nvidiactl"]), got
    assert len(log.read_text().split()) == 1  # NVML was asked once


def test_without_nvml_gpu_n_is_nvidia_n_and_the_launcher_says_so(tmp_path, monkeypatch, report_server, gpu_node,
                                                                   fence, nvml):
    monkeypatch.delenv("FAKE_NVML_MINORS")  # the library loads, and says the driver is not
    attempt = tmp_path / "a"
    probe(tmp_path, attempt, report_server.url, gpu_node, fence, gpus=["0"])
    out = start_launcher(attempt).communicate(timeout=60)[0].decode()
    got = opened(attempt)
    assert allowed(got["nvidia0"]) and got["nvidia3"] == "EPERM", got
    assert out.count("NVML did not load here: GPU N is taken to be /dev/nvidiaN") == 1, out


def test_a_zygote_reads_the_minors_once_for_the_launchers_it_forks_after(
        tmp_path, monkeypatch, report_server, gpu_node, fence, nvml):
    # given a zygote on a node where GPU 0 is /dev/nvidia3, whose first launcher is not kept after its attempt
    log = tmp_path / "nvml.log"
    for key, value in nvml_env(nvml, [3, 1, 2, 0], log).items():
        monkeypatch.setenv(key, value)
    zygote = Zygote()
    try:
        first = tmp_path / "first"
        make_config(first, report_server.url, ["true"], dev_root=str(gpu_node), gpus=["0"], cgroup_root=fence.root,
                    storage=UNKEPT)
        done = zygote.fork(first)
        until(lambda: (first / "result.json").exists() and done not in _waiting(zygote), timeout=30)
        # then the zygote read the minors (once) before it forked the launcher that waits for the next attempt
        [ahead] = _one_waiting(zygote)
        asked = [int(pid) for pid in log.read_text().split()]
        assert sorted(asked) == sorted([done, zygote.proc.pid]), asked
        # when that launcher runs an attempt given GPU 0
        second = tmp_path / "second"
        probe(tmp_path, second, report_server.url, gpu_node, fence, gpus=["0"])
        assert zygote.fork(second) == ahead
        until(lambda: (second / "result.json").exists(), timeout=30)
    finally:
        zygote.close()
    # then it fenced by the minors it inherited, without asking NVML again
    got = opened(second)
    assert [got[f"nvidia{n}"] for n in range(3)] == ["EPERM"] * 3 and allowed(got["nvidia3"]), got
    assert [int(pid) for pid in log.read_text().split()] == asked


def test_a_job_with_no_gpu_on_a_gpu_node_opens_none_of_them(tmp_path, report_server, gpu_node, fence):
    attempt = tmp_path / "cpu-only"
    probe(tmp_path, attempt, report_server.url, gpu_node, fence, memory_limit=200 << 20, pids_max=64)
    result = run_launcher(attempt)
    assert result["reason"] == "Succeeded", result
    got = opened(attempt)
    assert [got[f"nvidia{n}"] for n in range(GPUS)] == ["EPERM"] * GPUS, got
    assert allowed(got["nvidiactl"]), got


def test_a_job_given_every_gpu_or_on_a_node_without_any_joins_no_devices_group(tmp_path, gpu_node, fence):
    config = LaunchConfig(job_id="j", attempt_id="att-1", attempt=1, server="http://127.0.0.1:9", command=["true"],
                          dev_root=str(gpu_node), gpus=[str(n) for n in range(GPUS)])
    assert devices.for_replica(fence.root, config, "att-1-r0", print) is None  # nothing to deny: no move
    config.gpus, config.dev_root = [], str(tmp_path)  # no device files: a CPU node
    assert devices.for_replica(fence.root, config, "att-1-r0", print) is None
    assert wants(config) is None  # and no seat is held for it


def seat_child(launcher: int, fence: Fence) -> int:
    """The seat's child of ``launcher``, once it is in its devices group."""
    parent = fence.parent()

    def groups() -> list[list[int]]:
        return [cgroup.Group(os.path.join(parent, n)).pids() for n in os.listdir(parent)
                if n.startswith(f"{AHEAD}-{launcher}-")]
    until(lambda: [len(p) for p in groups()] == [1], timeout=30)
    return groups()[0][0]


def test_a_seat_on_a_gpu_node_holds_a_devices_group_and_its_job_opens_only_its_gpus(
        tmp_path, report_server, zygote, gpu_node, fence):
    # given a launcher kept after an attempt on a GPU node, with no memory or pids limit
    launcher = kept_after(zygote, tmp_path / "first", report_server.url, dev_root=str(gpu_node), gpus=["0"],
                          cgroup_root=fence.root)
    assert wants(LaunchConfig.read(tmp_path / "first")) == Wants(fence.root, False, False, False, True)
    # then its seat's child waits in a devices group
    child = seat_child(launcher, fence)
    # when the next attempt, given GPU 3, comes
    attempt = tmp_path / "second"
    probe(tmp_path, attempt, report_server.url, gpu_node, fence, gpus=["3"])
    assert zygote.fork(attempt) == launcher
    until(lambda: (attempt / LEFT_NAME).exists(), timeout=30)
    # then it ran in that child, which may open GPU 3 and none of the others
    assert read_result(attempt)["reason"] == "Succeeded"
    assert int((attempt / "output.log").read_text().split("pid ", 1)[1].split()[0]) == child
    got = opened(attempt)
    assert [got[f"nvidia{n}"] for n in range(3)] == ["EPERM"] * 3, got
    assert allowed(got["nvidia3"]) and allowed(got["nvidiactl"]), got
    # in its seat's group: named for the replica on v1, the seat's name kept on v2 (which renames none)
    assert devices_group(attempt, fence) == f"{ATTEMPT_ID}-r0" if fence.version == cgroup.V1 else \
        devices_group(attempt, fence).startswith(f"{AHEAD}-{launcher}-")
    assert not os.path.exists(os.path.join(fence.parent(), f"{ATTEMPT_ID}-r0"))
    assert seat_child(launcher, fence) != child  # and the next seat waits in a new one


def test_doctor_says_whether_a_jobs_gpus_are_fenced_here(tmp_path, monkeypatch, gpu_node, fence):
    from tests.unit.test_launch_cgroup import V1_MEMORY, layout
    from trainyard.cli.doctor import _gpu_devices

    fenced = _gpu_devices(fence.root, str(gpu_node))
    unfenced = _gpu_devices(layout(tmp_path / "v1-no-devices", V1_MEMORY), str(gpu_node))
    cpu_node = _gpu_devices(dev=str(tmp_path))
    assert (fenced.check, fenced.level) == ("gpu devices", "ok") and "4 GPU(s)" in fenced.found, fenced
    assert fence.version in fenced.found and "by NVML's minor number" in fenced.found, fenced
    monkeypatch.setattr(devices, "_known", None)  # NVML did not load
    guessed = _gpu_devices(fence.root, str(gpu_node))
    assert guessed.level == "warning" and "GPU N is taken to be /dev/nvidiaN" in guessed.found, guessed
    assert unfenced.level == "warning" and "CUDA_VISIBLE_DEVICES only" in unfenced.found, unfenced
    assert cpu_node.level == "ok" and "no NVIDIA GPU device files" in cpu_node.found
