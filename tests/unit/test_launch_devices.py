"""Which devices controller a host offers and what a replica's devices group is written, from folders laid out
like its cgroup mounts (no root needed; the kernel's own check is tests/integration/test_launcher_devices.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_launch_cgroup import V1_MEMORY, V2_ROOT, layout
from trainyard.launch import cgroup, devices, devprog
from trainyard.launch.config import LaunchConfig

V1_DEVICES = {"devices/devices.deny": "", "devices/devices.allow": "", "devices/cgroup.procs": ""}


@pytest.mark.parametrize(("files", "expected"), [
    ({}, None),                                                                     # nothing mounted
    (V1_DEVICES, cgroup.V1),                                                        # v1
    ({**V1_DEVICES, **V1_MEMORY, "unified/cgroup.controllers": ""}, cgroup.V1),     # hybrid: devices are on v1
    (V1_MEMORY, None),                                                              # v1 without devices
    (V2_ROOT, cgroup.V2),                                                           # v2: a device program
    ({**V2_ROOT, "cgroup.subtree_control": ""}, cgroup.V2),                         # ... which needs no controller
], ids=["none", "v1", "hybrid", "v1-no-devices", "v2", "v2-no-controllers"])
def test_detect_reads_the_mount_layout(tmp_path, monkeypatch, files, expected):
    monkeypatch.setattr(devprog, "usable", lambda: True)  # root, with the capabilities BPF takes
    assert devices.detect(layout(tmp_path, files)) == expected


def test_without_the_capabilities_bpf_takes_a_v2_host_fences_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(devprog, "usable", lambda: False)
    assert devices.detect(layout(tmp_path, V2_ROOT)) is None


@pytest.mark.parametrize("deny", [[], [0], [0, 2, 5]])
def test_the_device_program_denies_the_gpus_char_devices_and_allows_the_rest(deny):
    code = devprog.program(devices.MAJOR, deny)
    assert len(code) == 8 * (10 + len(deny))
    assert _run(code, 2, devices.MAJOR, 1) == (1 not in deny)
    assert all(_run(code, 2, devices.MAJOR, m) is False for m in deny)
    assert _run(code, 2, devices.MAJOR, 255) and _run(code, 1, devices.MAJOR, 0) and _run(code, 2, 511, 0)


def _run(code: bytes, kind: int, major: int, minor: int) -> bool:
    """What the kernel would get from ``code`` for a device of ``kind`` (2: char, 1: block): a tiny interpreter of
    the few instructions the program uses."""
    import struct

    regs, pc, ctx = [0] * 11, 0, (kind | 6 << 16, major, minor)
    while True:
        op, r, off, imm = struct.unpack_from("<BBhi", code, pc * 8)
        dst = r & 0xF
        pc += 1
        if op == 0x61:
            regs[dst] = ctx[off // 4]
        elif op == 0x57:
            regs[dst] &= imm
        elif op == 0xB7:
            regs[dst] = imm
        elif op == 0x55 and regs[dst] != imm or op == 0x15 and regs[dst] == imm:
            pc += off
        elif op == 0x95:
            return bool(regs[0])


def test_a_group_denies_the_gpus_it_is_given_read_write_and_mknod(tmp_path):
    root = layout(tmp_path, V1_DEVICES)
    group = devices.DevicesGroup.make(root, cgroup.V1, "att-1-r0", [3])
    assert group.path == str(tmp_path / "devices" / "trainyard" / "att-1-r0")
    assert Path(group.path, "devices.deny").read_text() == "c 195:3 rwm"


@pytest.mark.parametrize(("gpu", "minor"), [("0", 0), ("7", 7), ("GPU-5c3e0a1f", None), ("", None)])
def test_without_nvml_a_gpu_index_is_its_device_files_number(gpu, minor):
    assert devices.minor_of(gpu, None) == minor


@pytest.mark.parametrize(("gpu", "minor"), [("0", 3), ("3", 0), ("GPU-b", 1), ("7", None), ("GPU-x", None)])
def test_with_nvml_a_gpu_id_is_the_minor_nvml_gives_it(gpu, minor):
    assert devices.minor_of(gpu, {"0": 3, "1": 1, "3": 0, "GPU-b": 1}) == minor


class FakeNVML:
    """pynvml's calls read_minors makes, over GPUs given as their minors in index order (None: no answer)."""

    def __init__(self, minors: list[int | None], loads: bool = True) -> None:
        self.minors, self.loads, self.calls = minors, loads, []

    def nvmlInit(self):
        if not self.loads:
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self):
        return len(self.minors)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMinorNumber(self, h):
        if self.minors[h] is None:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return self.minors[h]

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h}".encode()


def test_nvml_maps_each_index_and_uuid_to_its_minor_and_leaves_out_a_gpu_it_cannot_answer_for():
    nvml = FakeNVML([3, None, 2, 0])
    assert devices.read_minors(nvml) == {"0": 3, "GPU-0": 3, "2": 2, "GPU-2": 2, "3": 0, "GPU-3": 0}
    assert nvml.calls == ["init", "shutdown"]
    assert devices.read_minors(FakeNVML([0], loads=False)) is None


def test_the_minors_are_read_once_a_process(monkeypatch):
    reads = []
    monkeypatch.setattr(devices, "_known", devices._UNREAD)
    monkeypatch.setattr(devices, "read_minors", lambda: reads.append(1) or {"0": 3})
    assert devices.minors() == devices.minors() == {"0": 3} and reads == [1]


def _node(monkeypatch, known: dict[str, int] | None, gpus: list[int] = [0, 1, 2, 3]) -> None:  # noqa: B006
    monkeypatch.setattr(devices, "node_gpus", lambda dev_root: gpus)
    monkeypatch.setattr(devices, "minors", lambda: known)


def _config(gpus: list[str]) -> LaunchConfig:
    return LaunchConfig(job_id="j", attempt_id="att-1", attempt=1, server="http://127.0.0.1:9", command=["true"],
                        gpus=gpus)


def test_a_replica_is_denied_the_device_files_of_the_minors_it_was_not_given(monkeypatch):
    _node(monkeypatch, {"0": 3, "1": 1, "2": 2, "3": 0, "GPU-a": 3})
    assert devices.denied(_config(["0"])) == [0, 1, 2]
    assert devices.denied(_config(["GPU-a", "3"])) == [1, 2]
    assert devices.denied(_config(["0", "1", "2", "3"])) == []  # given them all: no group
    assert devices.denied(_config(["4"])) is None  # NVML knows no such GPU: not placed


def test_nvml_is_read_only_for_a_replica_given_gpus_on_a_node_that_has_some(monkeypatch):
    _node(monkeypatch, None, gpus=[])
    monkeypatch.setattr(devices, "minors", lambda: pytest.fail("NVML read on a node without GPUs"))
    assert devices.denied(_config(["0"])) == []
    monkeypatch.setattr(devices, "node_gpus", lambda dev_root: [0, 1])
    assert devices.denied(_config([])) == [0, 1]


def test_without_nvml_gpu_n_is_nvidia_n_and_the_launcher_says_so_once(monkeypatch, capsys):
    _node(monkeypatch, None)
    monkeypatch.setattr(devices, "_guessed", cgroup.SayOnce())
    assert devices.denied(_config(["1"])) == [0, 2, 3] and devices.denied(_config(["2"])) == [0, 1, 3]
    assert capsys.readouterr().err.count("NVML did not load here: GPU N is taken to be /dev/nvidiaN") == 1


@pytest.mark.parametrize("mig", ["MIG-4b7f2c1e-9d3a-5e8f-a1b2-c3d4e5f60718", "MIG-GPU-5c3e0a1f/1/0"])
def test_a_mig_device_is_not_fenced_and_the_jobs_log_says_so(tmp_path, monkeypatch, mig):
    _node(monkeypatch, {"0": 0, "1": 1})
    config = _config([mig])
    assert devices.denied(config) is None
    said = []
    assert devices.for_replica(layout(tmp_path, V1_DEVICES), config, "att-1-r0", said.append) is None
    assert len(said) == 1 and f"GPU {mig} is a MIG device" in said[0] and "the GPU is not fenced" in said[0]
    assert not (tmp_path / "devices" / "trainyard").exists()


def test_pynvml_reads_the_minors_from_the_nvidia_library(tmp_path):
    """The real binding over a fake libnvidia-ml.so.1: the symbols it looks up are the ones the library has."""
    from tests.support import fake_nvml

    folder = fake_nvml.build(tmp_path / "lib")
    read = "from trainyard.launch import devices; print(devices.read_minors())"
    out = subprocess.run([sys.executable, "-c", read], env={**os.environ, **fake_nvml.env(folder, [3, 1])},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "{'0': 3, 'GPU-fake-0': 3, '1': 1, 'GPU-fake-1': 1}"
    out = subprocess.run([sys.executable, "-c", read], env={**os.environ, **fake_nvml.env(folder, None)},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "None"  # the library is there, the driver is not


def test_on_a_node_without_gpu_device_files_nothing_is_denied_nor_made(tmp_path):
    config = LaunchConfig(job_id="j", attempt_id="att-1", attempt=1, server="http://127.0.0.1:9", command=["true"],
                          dev_root=str(tmp_path))
    assert devices.node_gpus(str(tmp_path)) == [] and devices.denied(config) == []
    root = layout(tmp_path / "cg", V1_DEVICES)
    assert devices.for_replica(root, config, "att-1-r0", pytest.fail) is None
    assert not (tmp_path / "cg" / "devices" / "trainyard").exists()


def test_on_v2_the_program_goes_on_the_replicas_one_group(tmp_path, monkeypatch):
    root = layout(tmp_path, V2_ROOT)
    attached = []
    monkeypatch.setattr(devprog, "attach", lambda path, major, deny: attached.append((path, major, deny)))
    memory = cgroup.MemoryGroup.make(root, cgroup.V2, "att-1-r0", 1 << 30)
    shared = devices.DevicesGroup.make(root, cgroup.V2, "att-1-r0", [0, 1], (None, memory))
    alone = devices.DevicesGroup.make(root, cgroup.V2, "att-1-r1", [3])
    assert (shared.path, shared.owned) == (memory.path, False) and shared.remove() and os.path.isdir(memory.path)
    assert alone.path == str(tmp_path / "trainyard" / "att-1-r1") and alone.owned
    assert attached == [(memory.path, 195, [0, 1]), (alone.path, 195, [3])]
    assert "devices" not in Path(root, "trainyard", "cgroup.subtree_control").read_text()  # no controller to enable
