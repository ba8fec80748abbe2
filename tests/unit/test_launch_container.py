"""What the launcher asks podman or docker for, and which runtime the engine picks: argv and detection only
(tests/e2e/test_containers.py runs real containers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainyard.engines import runtime
from trainyard.launch.container import TRAINYARD_MOUNT, Container, container_name, runtime_failure_hint


def box(kind: str, **extra) -> Container:
    return Container({"runtime": f"/usr/bin/{kind}", "kind": kind, "image": "img:1", **extra},
                     container_name("J-1", 0))


def flags(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


JOB_ENV = {"TRAINYARD_JOB_ID": "J", "MASTER_ADDR": "127.0.0.1", "RANK": "1", "PATH": "/host/venv/bin:/usr/bin",
           "PYTHONPATH": "/mine", "CUDA_VISIBLE_DEVICES": "2,3", "SECRET": "s3cret"}


def test_podman_gets_cdi_devices_limits_mounts_and_the_jobs_variables_by_name():
    argv = box("podman", cpus=1.5).argv(["python3", "t.py"], JOB_ENV, Path("/h/a/work"),
                                        ["/h/a/work", "/h/a/outputs", "/h/a/outputs"], 256 << 20, ["2", "3"],
                                        ["/h/cache/inputs/k1"])
    assert argv[:2] == ["/usr/bin/podman", "run"] and argv[-3:] == ["img:1", "python3", "t.py"]
    assert flags(argv, "--name") == ["trainyard-j-1-r0"] and "--network=host" in argv
    assert flags(argv, "--device") == ["nvidia.com/gpu=2", "nvidia.com/gpu=3"]
    assert f"--memory={256 << 20}" in argv and f"--memory-swap={256 << 20}" in argv and "--cpus=1.5" in argv
    volumes = flags(argv, "-v")
    assert volumes[:2] == ["/h/a/work:/h/a/work", "/h/a/outputs:/h/a/outputs"]  # each once
    assert volumes[2] == "/h/cache/inputs/k1:/h/cache/inputs/k1:ro"  # a cached input: shared with the next job
    assert volumes[3].endswith(f":{TRAINYARD_MOUNT}/trainyard:ro")
    envs = flags(argv, "-e")
    assert {"TRAINYARD_JOB_ID", "MASTER_ADDR", "RANK", "SECRET"} <= set(envs)  # by name: no value in `ps`
    assert "s3cret" not in " ".join(argv) and "PATH" not in envs  # the host's PATH means nothing inside
    assert f"PYTHONPATH=/mine:{TRAINYARD_MOUNT}" in envs
    assert "CUDA_VISIBLE_DEVICES=0,1" in envs  # its own GPUs, numbered from 0 inside


def test_docker_gets_its_gpus_flag_and_a_string_command_the_images_shell():
    argv = box("docker").argv(["/usr/bin/bash", "-c", "echo hi"], {}, Path("/w"), [], None, ["1"])
    assert flags(argv, "--gpus") == ["device=1"] and "--device" not in argv
    assert argv[-4:] == ["img:1", "/bin/sh", "-c", "echo hi"]
    assert not any(a.startswith("--memory") for a in argv) and "CUDA_VISIBLE_DEVICES=0" in flags(argv, "-e")


def fake_tool(folder: Path, name: str, code: int) -> None:
    (folder / name).write_text(f"#!/bin/sh\nexit {code}\n")
    (folder / name).chmod(0o755)


def test_a_client_whose_daemon_does_not_answer_is_not_a_runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    fake_tool(tmp_path, "docker", 1)
    assert runtime.find("auto") is None and runtime.find("docker") is None
    fake_tool(tmp_path, "podman", 0)
    assert runtime.find("auto") == runtime.Runtime("podman", str(tmp_path / "podman"))
    assert runtime.find("none") is None
    with pytest.raises(ValueError, match="choose one of auto, podman, docker, none"):
        runtime.find("lxc")


@pytest.mark.parametrize("said, change", [
    # the first two as podman said them on this host (a sandbox without systemd); crun's, one of its kind
    ("Error: OCI runtime error: runc: runc create failed: unable to start container process: error during "
     "container init: error setting rlimits for ready process: error setting rlimit type 7: operation not permitted",
     "default_ulimits = []"),
    ("Error: OCI runtime error: runc: runc create failed: systemd not running on this host, cannot use systemd "
     "cgroups manager", 'cgroup_manager = "cgroupfs"'),
    ("Error: OCI runtime error: crun: opening file `memory.max` for writing: No such file or directory",
     'runtime = "runc"'),
])
def test_a_runtime_that_cannot_start_containers_here_is_told_what_to_change(tmp_path, said, change):
    log = tmp_path / "log"
    log.write_text('time="2026" level=warning msg="Failed to add conmon to systemd sandbox cgroup"\n' + said + "\n")
    hint = runtime_failure_hint(log)
    assert change in hint and "containers.conf" in hint and hint.endswith(f"(it said: {said})")


def test_any_other_runtime_error_is_passed_on_in_its_own_words(tmp_path):
    log = tmp_path / "log"
    log.write_text("Error: no such command\nError: executable file `nope` not found in $PATH\n")
    assert runtime_failure_hint(log) == "Error: executable file `nope` not found in $PATH"


def test_a_job_of_an_account_drops_inside_roots_container_and_its_variables_never_steer_roots_client(monkeypatch):
    # given a job run as an account (uid 4242), whose variables name what podman or the loader act on
    monkeypatch.setenv("PATH", "/usr/bin")
    monkeypatch.delenv("CONTAINERS_CONF", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    account = Container({"runtime": "/usr/bin/podman", "kind": "podman", "image": "img:1"}, container_name("J-1", 0),
                        {"uid": 4242, "gid": 4343, "name": "no-such-account-here"})
    job_env = {"TRAINYARD_JOB_ID": "J", "SECRET": "s3cret", "CONTAINERS_CONF": "/home/a/evil.conf",
               "LD_PRELOAD": "/home/a/evil.so", "STORAGE_OPTS": "mount_program=/home/a/evil"}
    # when the launcher builds the client's command line and environment
    argv = account.argv(["sh", "-c", "id"], job_env, Path("/w"), [], 64 << 20, [])
    client = account.client_env({**job_env, "PATH": "/home/a/bin"})
    # then podman runs the container as the account, not as itself under setpriv
    assert argv[0] == "/usr/bin/podman" and flags(argv, "--user") == ["4242:4343"] and "--group-add" not in argv
    assert f"--memory={64 << 20}" in argv  # root's runtime enforces it
    assert {"--security-opt=no-new-privileges", "--cap-drop=all"} <= set(argv)  # no setuid way back to root
    # the job's values of what the client reads go in by value; a secret (any other name) by name, as before
    envs = flags(argv, "-e")
    assert {"CONTAINERS_CONF=/home/a/evil.conf", "LD_PRELOAD=/home/a/evil.so", "SECRET"} <= set(envs)
    assert client["SECRET"] == "s3cret" and client["PATH"] == "/usr/bin"
    assert not {"CONTAINERS_CONF", "LD_PRELOAD", "STORAGE_OPTS"} & set(client)
    # a job of no account keeps today's client: its own user, its environment
    assert box("podman").client_env(job_env) == job_env and "--user" not in box("podman").argv([], {}, Path("/w"),
                                                                                                [], None, [])


@pytest.mark.parametrize("kind", ["podman", "docker"])
def test_the_servers_pids_limit_becomes_the_runtimes_and_off_leaves_its_default(kind):
    assert "--pids-limit=64" in box(kind).argv(["true"], {}, Path("/w"), [], None, [], pids=64)
    assert not any(a.startswith("--pids-limit") for a in box(kind).argv(["true"], {}, Path("/w"), [], None, []))
