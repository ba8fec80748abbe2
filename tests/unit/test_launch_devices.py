"""Which devices controller a host offers and what a replica's devices group is written, from folders laid out
like its cgroup mounts (no root needed; the kernel's own check is tests/integration/test_launcher_devices.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_launch_cgroup import V1_MEMORY, V2_ROOT, layout
from trainyard.launch import cgroup, devices
from trainyard.launch.config import LaunchConfig

V1_DEVICES = {"devices/devices.deny": "", "devices/devices.allow": "", "devices/cgroup.procs": ""}


@pytest.mark.parametrize(("files", "expected"), [
    ({}, None),                                                                     # nothing mounted
    (V1_DEVICES, cgroup.V1),                                                        # v1
    ({**V1_DEVICES, **V1_MEMORY, "unified/cgroup.controllers": ""}, cgroup.V1),     # hybrid: devices are on v1
    (V1_MEMORY, None),                                                              # v1 without devices
    (V2_ROOT, None),                                                                # v2: a BPF program, not done
], ids=["none", "v1", "hybrid", "v1-no-devices", "v2"])
def test_detect_reads_the_mount_layout(tmp_path, files, expected):
    assert devices.detect(layout(tmp_path, files)) == expected


def test_a_group_denies_the_gpus_it_is_given_read_write_and_mknod(tmp_path):
    root = layout(tmp_path, V1_DEVICES)
    group = devices.DevicesGroup.make(root, "att-1-r0", [3])
    assert group.path == str(tmp_path / "devices" / "trainyard" / "att-1-r0")
    assert Path(group.path, "devices.deny").read_text() == "c 195:3 rwm"


@pytest.mark.parametrize(("gpu", "minor"), [("0", 0), ("7", 7), ("GPU-5c3e0a1f", None), ("", None)])
def test_a_gpu_id_is_its_device_files_number(gpu, minor):
    assert devices.minor_of(gpu) == minor


def test_on_a_node_without_gpu_device_files_nothing_is_denied_nor_made(tmp_path):
    config = LaunchConfig(job_id="j", attempt_id="att-1", attempt=1, server="http://127.0.0.1:9", command=["true"],
                          dev_root=str(tmp_path))
    assert devices.node_gpus(str(tmp_path)) == [] and devices.denied(config) == []
    root = layout(tmp_path / "cg", V1_DEVICES)
    assert devices.for_replica(root, config, "att-1-r0", pytest.fail) is None
    assert not (tmp_path / "cg" / "devices" / "trainyard").exists()
