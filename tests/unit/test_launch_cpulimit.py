"""Which cpu controller a host offers, the weights and quotas written, and when a replica gets a cpu group at all,
from folders laid out like its cgroup mounts (no root needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_launch_cgroup import V1_MEMORY, V2_ROOT, layout
from trainyard.launch import cgroup, cpulimit, pidlimit, seat
from trainyard.launch.config import LaunchConfig

V1_CPU = {"cpu/cpu.shares": "1024\n", "cpu/cgroup.procs": ""}


def config(**kw) -> LaunchConfig:
    return LaunchConfig(job_id="j", attempt_id="att-1", attempt=1, server="http://127.0.0.1:9", command=["true"], **kw)


@pytest.mark.parametrize(("files", "expected"), [
    ({}, None),                                                                       # nothing mounted
    (V1_CPU, cgroup.V1),                                                              # v1 (cpu, or cpu,cpuacct)
    ({**V1_CPU, **V1_MEMORY, "unified/cgroup.controllers": ""}, cgroup.V1),           # hybrid: cpu is on v1
    (V1_MEMORY, None),                                                                # v1 without cpu
    (V2_ROOT, cgroup.V2),                                                             # v2, cpu enabled
    ({**V2_ROOT, "cgroup.subtree_control": "memory pids\n"}, None),                   # v2, cpu not delegated
    ({**V2_ROOT, "cgroup.subtree_control": "", "trainyard/cgroup.subtree_control": "cpu\n"},
     cgroup.V2),                                                                       # v2, a trainyard tree delegated
], ids=["none", "v1", "hybrid", "v1-no-cpu", "v2", "v2-not-enabled", "v2-delegated"])
def test_detect_reads_the_mount_layout(tmp_path, files, expected):
    assert cpulimit.detect(layout(tmp_path, files)) == expected


@pytest.mark.parametrize(("cpu", "shares", "weight", "quota"), [
    (1, 1024, 39, 100_000),        # Kubernetes: 1 core is 1024 shares, weight 39
    (0.5, 512, 20, 50_000),
    (3, 3072, 118, 300_000),
    (0.001, 2, 1, 1000),           # 1m: the kernel's least shares and quota
    (0, 2, 1, 1000),
    (512, 262144, 10000, 51_200_000),  # past the kernel's most shares
])
def test_cores_map_to_shares_weights_and_quotas_as_kubernetes_maps_them(cpu, shares, weight, quota):
    assert (cpulimit.shares(cpu), cpulimit.weight(cpu), cpulimit.quota(cpu)) == (shares, weight, quota)


def test_a_v1_group_gets_its_shares_and_only_with_cpu_limit_a_quota_of_its_period(tmp_path):
    root = layout(tmp_path, V1_CPU)
    soft = cpulimit.CpuGroup.make(root, cgroup.V1, "att-1-r0", 3, False)
    assert soft.path == str(tmp_path / "cpu" / "trainyard" / "att-1-r0") and soft.owned
    assert Path(soft.path, "cpu.shares").read_text() == "3072" and not Path(soft.path, "cpu.cfs_quota_us").exists()
    hard = cpulimit.CpuGroup.make(root, cgroup.V1, "att-1-r1", 0.5, True)
    assert Path(hard.path, "cpu.shares").read_text() == "512"
    assert Path(hard.path, "cpu.cfs_quota_us").read_text() == "50000"  # the kernel's period: 100 ms
    Path(hard.path, "cpu.cfs_period_us").write_text("50000\n")  # an admin's own
    hard.apply_limit()
    assert Path(hard.path, "cpu.cfs_quota_us").read_text() == "25000"


def test_on_v2_the_weight_and_cap_go_in_the_replicas_one_group(tmp_path):
    root = layout(tmp_path, V2_ROOT)
    pids = pidlimit.PidsGroup.make(root, cgroup.V2, "att-1-r0", 64)
    group = cpulimit.CpuGroup.make(root, cgroup.V2, "att-1-r0", 0.5, True, (None, pids))
    assert group.path == pids.path and not group.owned
    assert (tmp_path / "trainyard" / "cgroup.subtree_control").read_text() == "+cpu"  # after +pids
    assert Path(group.path, "cpu.weight").read_text() == "20"
    assert Path(group.path, "cpu.max").read_text() == "50000 100000"
    assert cgroup.wrap(["true"], (pids, group)).count(str(Path(pids.path, "cgroup.procs"))) == 1
    assert group.remove() and Path(pids.path).is_dir()  # the pids group's to remove


def test_a_weight_rides_along_with_another_group_and_alone_only_as_a_cap(tmp_path):
    root = layout(tmp_path, V1_CPU)
    other = cgroup.Group(str(tmp_path / "memory-group"))
    # a move of its own costs a start ~10 ms: not for a weight alone
    assert cpulimit.for_replica(root, config(cpu=1.0), "att-1-r0", (None, None)) is None
    assert not (tmp_path / "cpu" / "trainyard").exists()
    joined = cpulimit.for_replica(root, config(cpu=1.0), "att-1-r0", (other, None))
    capped = cpulimit.for_replica(root, config(cpu=1.0, cpu_limit=True), "att-1-r1", (None, None))
    assert joined is not None and not joined.hard and capped is not None and capped.hard
    # a config that names no cores (one written before they were sent), or no cgroup root: none
    assert cpulimit.for_replica(root, config(), "att-1-r2", (other,)) is None
    assert cpulimit.for_replica(None, config(cpu=1.0, cpu_limit=True), "att-1-r2") is None


def test_without_a_cpu_controller_nothing_is_made_or_said(tmp_path, capsys):
    root = layout(tmp_path, V1_MEMORY)
    assert cpulimit.for_replica(root, config(cpu=2.0, cpu_limit=True), "att-1-r0", (None,)) is None
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(("kw", "wanted"), [
    ({"cpu": 1.0}, None),                                                              # no group to hold
    ({"cpu": 1.0, "pids_max": 64}, seat.Wants("/sys/fs/cgroup", False, True, True)),   # the weight rides along
    ({"cpu": 1.0, "cpu_limit": True}, seat.Wants("/sys/fs/cgroup", False, False, True)),
    ({"pids_max": 64}, seat.Wants("/sys/fs/cgroup", False, True, False)),              # no cores named
])
def test_a_seat_holds_a_cpu_group_where_its_attempt_joined_one(kw, wanted):
    assert seat.wants(config(**kw)) == wanted


def test_a_seat_whose_host_refuses_the_cpu_group_still_holds_the_others(tmp_path, monkeypatch):
    root = layout(tmp_path, {**V1_CPU, "pids/cgroup.procs": ""})
    made = []
    monkeypatch.setattr(seat.Seat, "_spawn", lambda self: made.append(dict(self.groups)))
    new_group = cgroup.new_group

    def refuse_cpu(parent: str, name: str) -> str:
        if "/cpu/" in parent:
            raise PermissionError(13, "refused")
        return new_group(parent, name)

    monkeypatch.setattr(cgroup, "new_group", refuse_cpu)
    held = seat.Seat.make(seat.Wants(root, False, True, True))
    assert held is not None and list(held.groups) == ["pids"] and made == [held.groups]


@pytest.mark.parametrize(("files", "level"), [(V1_CPU, "ok"), (V2_ROOT, "ok"), (V1_MEMORY, "warning")],
                         ids=["v1", "v2", "none"])
def test_doctor_says_whether_a_jobs_cores_are_weighed_here(tmp_path, files, level):
    from trainyard.cli.doctor import _cpu

    found = _cpu(layout(tmp_path, files))
    assert found.level == level and found.check == "cpu", found
    assert (cgroup.V1 in found.found or cgroup.V2 in found.found) == (level == "ok")


@pytest.fixture
def node_of_32_cores(monkeypatch) -> None:
    """A node of 32 cores, and a launcher that has weighed no parent yet."""
    monkeypatch.setattr(cpulimit, "cores", lambda: 32)
    monkeypatch.setattr(cpulimit, "_weighed", set())


def v1_parent_shares(tmp_path: Path, text: str) -> tuple[str, Path]:
    """A v1 layout whose parent of our cpu groups holds ``text`` in its ``cpu.shares``."""
    root = layout(tmp_path, V1_CPU)
    shares = Path(cgroup.v1_parent(root, "cpu"), "cpu.shares")
    shares.parent.mkdir(parents=True)
    shares.write_text(text)
    return root, shares


def test_the_parent_of_the_cpu_groups_weighs_as_the_nodes_cores_once_a_launcher(tmp_path, node_of_32_cores):
    # given the parent at the kernel's default
    root, parent = v1_parent_shares(tmp_path, "1024\n")
    # when the launcher makes its first cpu group
    cpulimit.CpuGroup.make(root, cgroup.V1, "att-1-r0", 1, False)
    # then the parent weighs as 32 cores, as Kubernetes weighs kubepods
    assert parent.read_text() == str(32 * 1024)
    # and the next group of the same launcher does not look again (one read a launcher, not one a start)
    parent.write_text("1024\n")
    cpulimit.CpuGroup.make(root, cgroup.V1, "att-1-r1", 1, False)
    assert parent.read_text() == "1024\n"


def test_a_weight_someone_else_gave_the_parent_is_kept(tmp_path, node_of_32_cores):
    root, parent = v1_parent_shares(tmp_path, "512\n")
    cpulimit.CpuGroup.make(root, cgroup.V1, "att-1-r0", 1, False)
    assert parent.read_text() == "512\n"


def test_a_parent_we_may_not_write_weighs_as_it_did_and_nothing_fails(tmp_path, node_of_32_cores, monkeypatch):
    root, parent = v1_parent_shares(tmp_path, "1024\n")
    write = cgroup.write

    def refuse_the_parent(path: str, value: str, optional: bool = False) -> None:
        if path == str(parent):
            raise PermissionError(13, "refused")
        write(path, value, optional)

    monkeypatch.setattr(cgroup, "write", refuse_the_parent)
    group = cpulimit.CpuGroup.make(root, cgroup.V1, "att-1-r0", 1, False)
    assert Path(group.path, "cpu.shares").read_text() == "1024" and parent.read_text() == "1024\n"


@pytest.mark.parametrize(("cores", "own", "expected"), [
    (32, "/system.slice/trainyard.service", "1250"),  # Kubernetes' map of 32 cores' shares
    (2, "/system.slice/trainyard.service", "100"),    # that map's 79 for two cores: never below the default
    (32, "/trainyard/server", "100"),                  # a tree delegated to us: its weight is its delegator's
], ids=["v2", "v2-two-cores", "v2-delegated"])
def test_on_v2_the_parent_gets_the_mapped_weight_of_the_nodes_cores(tmp_path, monkeypatch, cores, own, expected):
    root = layout(tmp_path, {**V2_ROOT, "trainyard/cpu.weight": "100\n"})
    monkeypatch.setattr(cpulimit, "cores", lambda: cores)
    monkeypatch.setattr(cpulimit, "_weighed", set())
    monkeypatch.setattr(cgroup, "own_v2_path", lambda: own)
    pids = pidlimit.PidsGroup.make(root, cgroup.V2, "att-1-r0", 64)
    cpulimit.CpuGroup.make(root, cgroup.V2, "att-1-r0", 1, False, (pids,))
    assert (tmp_path / "trainyard" / "cpu.weight").read_text().strip() == expected


def test_a_seat_weighs_the_parent_while_its_launcher_waits(tmp_path, node_of_32_cores, monkeypatch):
    root, parent = v1_parent_shares(tmp_path, "1024\n")
    (tmp_path / "pids" / "cgroup.procs").parent.mkdir()
    (tmp_path / "pids" / "cgroup.procs").write_text("")
    monkeypatch.setattr(seat.Seat, "_spawn", lambda self: None)
    held = seat.Seat.make(seat.Wants(root, False, True, True))
    assert held is not None and list(held.groups) == ["pids", "cpu"]
    assert parent.read_text() == str(32 * 1024)


@pytest.mark.parametrize(("text", "said"), [
    ("1024\n", "all its jobs together weigh as its 32 cores (cpu.shares 32768, as kubepods does)"),
    ("32768\n", "all its jobs together weigh as its 32 cores (cpu.shares 32768, as kubepods does)"),
    ("512\n", "all its jobs together keep the cpu.shares 512 someone else gave their parent (its cores': 32768)"),
], ids=["default", "ours", "an-admins"])
def test_doctor_says_how_all_jobs_together_weigh_against_the_rest(tmp_path, node_of_32_cores, text, said):
    from trainyard.cli.doctor import _cpu

    root, _ = v1_parent_shares(tmp_path, text)
    assert _cpu(root).found.endswith(f", and {said}")
