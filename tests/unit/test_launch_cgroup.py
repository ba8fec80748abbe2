"""Which memory enforcement a host offers, read from folders laid out like its cgroup mounts (no root needed)."""

from __future__ import annotations

import os
import subprocess
import time
import typing
from pathlib import Path

import pytest

from trainyard.launch import cgroup, procs
from trainyard.spec.records import MemoryEnforcement, NodeInfo


def layout(root: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return str(root)


V1_MEMORY = {"memory/memory.limit_in_bytes": "9223372036854771712\n", "memory/cgroup.procs": ""}
V2_ROOT = {"cgroup.controllers": "cpuset cpu io memory pids\n", "cgroup.subtree_control": "cpu memory pids\n",
           "cgroup.procs": ""}


@pytest.mark.parametrize(("files", "expected"), [
    ({}, cgroup.SAMPLED),                                                             # nothing mounted
    (V1_MEMORY, cgroup.V1),                                                           # v1
    ({**V1_MEMORY, "unified/cgroup.controllers": "hugetlb\n"}, cgroup.V1),            # hybrid: memory is on v1
    ({"cpu/cpu.shares": "1024\n"}, cgroup.SAMPLED),                                   # v1 without memory
    (V2_ROOT, cgroup.V2),                                                             # v2, memory enabled
    ({**V2_ROOT, "cgroup.subtree_control": "cpu pids\n"}, cgroup.SAMPLED),            # v2, memory not delegated
    ({**V2_ROOT, "cgroup.controllers": "cpu io pids\n"}, cgroup.SAMPLED),             # v2 without memory
    ({**V2_ROOT, "cgroup.subtree_control": "", "trainyard/cgroup.subtree_control": "memory\n"},
     cgroup.V2),                                                                       # v2, a trainyard tree delegated
], ids=["none", "v1", "hybrid", "v1-no-memory", "v2", "v2-not-enabled", "v2-no-memory", "v2-delegated"])
def test_detect_reads_the_mount_layout(tmp_path, files, expected):
    assert cgroup.detect(layout(tmp_path, files)) == expected


def test_a_v2_group_gets_its_limit_no_swap_and_dies_whole(tmp_path):
    root = layout(tmp_path, V2_ROOT)
    group = cgroup.MemoryGroup.make(root, cgroup.V2, "att-1-r0", 100 << 20)
    assert group.path == str(tmp_path / "trainyard" / "att-1-r0")
    assert (tmp_path / "trainyard" / "cgroup.subtree_control").read_text() == "+memory"
    written = {n: (tmp_path / "trainyard" / "att-1-r0" / n).read_text()
               for n in ("memory.max", "memory.swap.max", "memory.oom.group")}
    assert written == {"memory.max": str(100 << 20), "memory.swap.max": "0", "memory.oom.group": "1"}


def test_a_v1_group_limits_memory_and_swap_and_a_second_make_gets_its_own_folder(tmp_path):
    root = layout(tmp_path, V1_MEMORY)
    made = tmp_path / "memory" / "trainyard" / "att-1-r0"
    made.mkdir(parents=True)
    (made / "memory.memsw.limit_in_bytes").write_text("")  # a leftover that still holds a process
    group = cgroup.MemoryGroup.make(root, cgroup.V1, "att-1-r0", 100 << 20)
    assert group.path == f"{made}-{os.getpid()}"
    assert Path(group.path, "memory.limit_in_bytes").read_text() == str(100 << 20)
    assert Path(group.path, "memory.swappiness").read_text() == "0"  # no memsw file here: no swapping at all


@pytest.mark.parametrize("version, files", [(cgroup.V2, V2_ROOT), (cgroup.V1, V1_MEMORY)])
def test_groups_made_under_the_servers_umask_stay_readable_by_the_jobs_account(tmp_path, version, files):
    root = layout(tmp_path, files)
    old = os.umask(0o077)  # the server's: its launchers inherit it
    try:
        group = cgroup.MemoryGroup.make(root, version, "att-1-r0", 100 << 20)
    finally:
        os.umask(old)
    for folder in (Path(group.path).parent, Path(group.path)):
        assert folder.stat().st_mode & 0o777 == 0o755, folder


def test_detect_is_sampled_where_groups_cannot_be_made(tmp_path, monkeypatch):
    root = layout(tmp_path, V1_MEMORY)
    # the memory controller read-only to us, as it is to any user but root (and root may write anywhere,
    # so a chmod would not show it here)
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: access(path, mode) and not (
        mode & os.W_OK and str(path).startswith(str(tmp_path / "memory"))))
    assert cgroup.detect(root) == cgroup.SAMPLED


def test_the_node_record_spells_the_same_values():
    assert set(typing.get_args(MemoryEnforcement)) == {cgroup.V1, cgroup.V2, cgroup.SAMPLED}
    assert NodeInfo(name="n", cpu=1, memory=1).memory_enforcement == cgroup.SAMPLED


@pytest.mark.parametrize(("version", "name", "text", "kills"), [
    (cgroup.V1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", 2),
    (cgroup.V2, "memory.events", "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 1\n", 1),
    (cgroup.V1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n", None),  # before Linux 4.13
])
def test_oom_kills_are_read_from_the_groups_own_events(tmp_path, version, name, text, kills):
    (tmp_path / name).write_text(text)
    assert cgroup.MemoryGroup(str(tmp_path), version, 1 << 20).oom_kills() == kills


def test_without_a_counter_a_sigkill_at_the_limit_is_an_oom_kill(tmp_path):
    group = cgroup.MemoryGroup(str(tmp_path), cgroup.V1, 1 << 20)
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")
    (tmp_path / "memory.failcnt").write_text("0\n")
    assert not group.oom_killed(-9)
    (tmp_path / "memory.failcnt").write_text("12\n")
    assert group.oom_killed(-9) and not group.oom_killed(1)


def test_sweep_removes_only_old_empty_groups(tmp_path):
    for name in ("old-r0", "new-r0"):
        (tmp_path / name).mkdir()
    hour_ago = time.time() - 3600
    os.utime(tmp_path / "old-r0", (hour_ago, hour_ago))
    (tmp_path / "memory.limit_in_bytes").write_text("")  # the parent's own files are not groups
    assert cgroup.sweep(str(tmp_path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.limit_in_bytes", "new-r0"]


def test_the_shim_joins_then_execs_the_command_with_its_arguments(tmp_path):
    group = cgroup.MemoryGroup(str(tmp_path), cgroup.V1, 1 << 20)
    out = subprocess.run(group.wrap(["printf", "%s|", "a b", "$HOME", ""]), capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "a b|$HOME||"
    assert (tmp_path / "cgroup.procs").read_text() == "0\n"  # what the kernel reads as "me"


def test_the_shim_fails_loudly_when_it_cannot_join(tmp_path):
    group = cgroup.MemoryGroup(str(tmp_path / "gone"), cgroup.V1, 1 << 20)
    out = subprocess.run(group.wrap(["true"]), capture_output=True, text=True)
    assert out.returncode == cgroup.JOIN_FAILED and "cannot join" in out.stderr


def test_check_executable_finds_what_exec_would(tmp_path):
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        procs.check_executable("tool", str(tmp_path), env)  # found, but not executable
    os.chmod(tmp_path / "bin" / "tool", 0o755)
    procs.check_executable("tool", str(tmp_path), env)
    procs.check_executable("./bin/tool", str(tmp_path), {})
    procs.check_executable("sh", str(tmp_path), env)
    with pytest.raises(FileNotFoundError):
        procs.check_executable("no-such-command-xyz", str(tmp_path), env)
