"""Which process limit a host offers, and the pids group's files, from folders laid out like its cgroup mounts
(no root needed)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_launch_cgroup import V1_MEMORY, V2_ROOT, layout
from trainyard.launch import cgroup, leftover_tree, pidlimit

V1_PIDS = {"pids/cgroup.procs": ""}  # the v1 controller's root has no pids.max of its own


@pytest.mark.parametrize(("files", "expected"), [
    ({}, None),                                                                       # nothing mounted
    (V1_PIDS, cgroup.V1),                                                             # v1
    ({**V1_PIDS, **V1_MEMORY, "unified/cgroup.controllers": ""}, cgroup.V1),          # hybrid: pids is on v1
    (V1_MEMORY, None),                                                                # v1 without pids
    (V2_ROOT, cgroup.V2),                                                             # v2, pids enabled
    ({**V2_ROOT, "cgroup.subtree_control": "cpu memory\n"}, None),                    # v2, pids not delegated
    ({**V2_ROOT, "cgroup.controllers": "cpu io memory\n"}, None),                     # v2 without pids
    ({**V2_ROOT, "cgroup.subtree_control": "", "trainyard/cgroup.subtree_control": "pids\n"},
     cgroup.V2),                                                                       # v2, a trainyard tree delegated
], ids=["none", "v1", "hybrid", "v1-no-pids", "v2", "v2-not-enabled", "v2-no-pids", "v2-delegated"])
def test_detect_reads_the_mount_layout(tmp_path, files, expected):
    assert pidlimit.detect(layout(tmp_path, files)) == expected


def test_a_v1_group_is_its_own_in_the_pids_hierarchy(tmp_path):
    root = layout(tmp_path, {**V1_PIDS, **V1_MEMORY})
    memory = cgroup.MemoryGroup.make(root, cgroup.V1, "att-1-r0", 100 << 20)
    group = pidlimit.PidsGroup.make(root, cgroup.V1, "att-1-r0", 64, memory)
    assert group.path == str(tmp_path / "pids" / "trainyard" / "att-1-r0") and group.owned
    assert Path(group.path, "pids.max").read_text() == "64"


def test_on_v2_the_limit_goes_in_the_replicas_one_group_and_is_joined_once(tmp_path):
    root = layout(tmp_path, V2_ROOT)
    memory = cgroup.MemoryGroup.make(root, cgroup.V2, "att-1-r0", 100 << 20)
    group = pidlimit.PidsGroup.make(root, cgroup.V2, "att-1-r0", 64, memory)
    assert group.path == memory.path and not group.owned
    assert (tmp_path / "trainyard" / "cgroup.subtree_control").read_text() == "+pids"  # after +memory
    assert Path(memory.path, "pids.max").read_text() == "64"
    assert cgroup.wrap(["true"], (memory, group)).count(os.path.join(memory.path, "cgroup.procs")) == 1
    assert group.remove() and os.path.isdir(memory.path)  # the memory group's to remove


def test_on_v2_without_a_memory_limit_the_group_is_its_own(tmp_path):
    group = pidlimit.PidsGroup.make(layout(tmp_path, V2_ROOT), cgroup.V2, "att-1-r0", 64)
    assert group.path == str(tmp_path / "trainyard" / "att-1-r0") and group.owned
    assert (tmp_path / "trainyard" / "cgroup.subtree_control").read_text() == "+pids"


@pytest.mark.parametrize(("files", "refused"), [
    ({"pids.events": "max 3\n"}, 3),
    ({"pids.events": "max 0\n"}, 0),
    ({"pids.current": "12\n"}, None),  # a kernel without the events file does not say

])
def test_refused_forks_are_read_from_the_groups_own_files(tmp_path, files, refused):
    layout(tmp_path, files)
    assert pidlimit.PidsGroup(str(tmp_path), cgroup.V1, 64).refused() == refused


def test_the_message_names_the_limit_and_the_setting(tmp_path):
    (tmp_path / "pids.events").write_text("max 5\n")
    message = pidlimit.PidsGroup(str(tmp_path), cgroup.V2, 64).message()
    assert message == ("the pids limit of 64 processes was reached (cgroup-v2, the server's pids_max): "
                       "5 forks failed with EAGAIN")


def test_the_shim_joins_every_group_then_execs_the_command(tmp_path):
    memory, pids = (cgroup.Group(str(tmp_path / name)) for name in ("memory", "pids"))
    for group in (memory, pids):
        os.mkdir(group.path)
    out = subprocess.run(cgroup.wrap(["printf", "%s|", "--", "a b", ""], (memory, pids)), capture_output=True,
                         text=True)
    assert out.returncode == 0 and out.stdout == "--|a b||"
    assert [(Path(g.path) / "cgroup.procs").read_text() for g in (memory, pids)] == ["0\n", "0\n"]
    failed = subprocess.run(cgroup.wrap(["true"], (memory, cgroup.Group(str(tmp_path / "gone")))),
                            capture_output=True, text=True)
    assert failed.returncode == cgroup.JOIN_FAILED and f"cannot join the cgroup {tmp_path / 'gone'}" in failed.stderr
    assert cgroup.wrap(["true"], ()) == ["true"]


@pytest.mark.parametrize("recorded", [lambda groups: {"cgroups": groups},
                                      lambda groups: {"cgroup": groups[0]}],  # by a launcher before pids limits
                         ids=["groups", "one-group"])
def test_the_empty_groups_a_dead_launcher_recorded_are_removed_by_the_engine(tmp_path, recorded):
    groups = [str(tmp_path / g) for g in ("memory-g", "pids-g")]
    for g in groups:
        os.mkdir(g)
    saved = {"pgid": 2 ** 22 + 1, "start": None, **recorded(groups)}  # a process group that is long gone
    (tmp_path / leftover_tree.COMMAND_NAME).write_text(json.dumps(saved))
    assert not leftover_tree.kill_left(str(tmp_path))
    assert [g for g in groups if os.path.isdir(g)] == groups[len(recorded(groups).get("cgroups", groups[:1])):]


def test_without_a_limit_or_a_root_no_group_is_asked_for(tmp_path):
    assert pidlimit.for_replica(None, 64, "att-1-r0") is None
    assert pidlimit.for_replica(str(tmp_path), None, "att-1-r0") is None
    assert pidlimit.for_replica(str(tmp_path), 0, "att-1-r0") is None
