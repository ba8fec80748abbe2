"""`image:` jobs on the local engine through a real podman, with images built here (no registry)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import need, need_module
from tests.e2e.helpers import until
from tests.support import images
from tests.support.wheels import make_wheel
from tests.support.servers import ServerProcess

need(not images.tools_missing(), f"container tests need {', '.join(images.tools_missing())} (.ci/run installs them)")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def busybox():
    return images.busybox_image()


@pytest.fixture(scope="module")
def python_image():
    return images.python_image()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One podman server for the module (a start costs seconds on a busy machine); each test uses its own jobs."""
    base = tmp_path_factory.mktemp("containers")
    (base / "server.yaml").write_text("sample_every: 1\n")  # resource samples soon enough for a short job
    srv = ServerProcess(base / "home", ["--cpus", "4", "--memory", "4Gi", "--container-runtime", "podman",
                                        "--config", str(base / "server.yaml")])
    srv.start()
    yield srv
    srv.stop_all()


def containers_of(job_id: str) -> list[str]:
    return [n for n in images.leftover_containers() if n.startswith(f"trainyard-{job_id}".lower())]


def test_a_job_in_an_image_writes_an_output_that_download_returns(server, busybox, tmp_path):
    c = server.client()
    job = c.submit({"name": "bb", "image": busybox, "resources": {"cpu": 1},
                    "command": "echo hello from $TRAINYARD_JOB_ID > $TRAINYARD_OUTPUT_DIR/greeting.txt; "
                               # the metrics file protocol: no trainyard (no Python) in busybox
                               """echo '{"step": 1, "ts": 0, "values": {"acc": 0.9}}' >> "$TRAINYARD_METRICS_FILE"; """
                               "cat /etc/os-release 2>/dev/null || echo no-os-release; echo done"})
    info = job.wait(timeout=60)
    assert info.status.value == "succeeded", job.logs()
    assert job.logs().splitlines() == ["no-os-release", "done"]  # busybox's files, not the host's
    assert [(m.name, m.step, m.value) for m in job.metrics()] == [("acc", 1, 0.9)]
    r = server.cli("download", job.id, "--to", str(tmp_path / "dl"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "dl" / "greeting.txt").read_text() == f"hello from {job.id}\n"
    assert containers_of(job.id) == []


def test_a_host_folder_given_as_an_input_is_read_only_in_the_container(server, busybox, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("A")
    job = server.client().submit({"name": "ro", "image": busybox, "inputs": {"data": str(data)},
                                  "command": 'cat "$TRAINYARD_INPUT_DATA/a.txt"; echo; '
                                             '(echo x > "$TRAINYARD_INPUT_DATA/b.txt") 2>&1 || echo refused'})
    info = job.wait(timeout=60)
    assert info.status.value == "succeeded", job.logs()
    lines = job.logs().splitlines()  # the shell's complaint on stdout too: in order, not mixed into a line
    assert lines[0] == "A" and lines[-1] == "refused" and "Read-only file system" in lines[-2], lines
    assert sorted(p.name for p in data.iterdir()) == ["a.txt"]


def test_a_secret_reaches_the_container_by_name_never_on_a_command_line(server, busybox, tmp_path):
    import psutil

    value = "ctr-secret-" + "Qz7" * 8
    c = server.client()
    c.secrets.set("registry-token", value)
    job = c.submit({"name": "bb-secret", "image": busybox, "secrets": {"TOKEN": "registry-token"},
                    "command": 'echo "$TOKEN" > $TRAINYARD_OUTPUT_DIR/t.txt; echo "got $TOKEN"; sleep 3'})
    seen: list[str] = []
    while not job.refresh().status.is_terminal():  # podman's client and the container's processes, while they run
        for p in psutil.process_iter(["cmdline"]):
            seen.append(" ".join(p.info["cmdline"] or []))
    assert job.wait(timeout=60).status.value == "succeeded", job.logs()
    assert job.logs().splitlines() == ["got " + "*" * len(value)]
    assert any("podman" in s and "run" in s for s in seen) and not any(value in s for s in seen)
    assert server.cli("download", job.id, "--to", str(tmp_path / "dl")).returncode == 0
    assert (tmp_path / "dl" / "t.txt").read_text() == value + "\n"


def test_the_memory_limit_in_a_container_gives_oomkilled(server, busybox):
    job = server.client().submit({"name": "greedy", "image": busybox, "resources": {"memory": "64Mi", "cpu": 1},
                                  "command": "dd if=/dev/zero of=/dev/null bs=300M count=1"})
    info = job.wait(timeout=60)
    assert info.status.value == "failed" and info.attempts[-1].reason == "OOMKilled", job.logs()
    assert containers_of(job.id) == []


def test_cancel_stops_and_removes_the_container(server, busybox):
    job = server.client().submit({"name": "sleepy", "image": busybox, "grace_period": 1,
                                  "command": "echo up; sleep 300"})
    until(lambda: "up" in job.logs(), timeout=60)
    assert containers_of(job.id)  # it runs in one
    info = job.cancel()
    info = job.wait(timeout=60)
    assert info.status.value == "cancelled"
    assert containers_of(job.id) == []


def test_a_timeout_stops_and_removes_the_container(server, busybox):
    job = server.client().submit({"name": "slow", "image": busybox, "grace_period": 1, "timeout": 3,
                                  "retry": {"max": 0}, "command": "echo up; sleep 300"})
    until(lambda: "up" in job.logs(), timeout=60)
    info = job.wait(timeout=60)
    assert info.status.value == "failed" and info.attempts[-1].reason == "Timeout", job.logs()
    assert containers_of(job.id) == []


def test_a_missing_image_fails_with_image_pull_failed(server):
    c = server.client()
    never = c.submit({"name": "never", "image": "localhost/trainyard-test/absent:1", "command": "true",
                      "image_pull_policy": "never"})
    pulled = c.submit({"name": "pull", "image": "localhost/trainyard-test/absent:1", "command": "true"})
    for job, words in ((never, "not present here and image_pull_policy is never"), (pulled, "cannot pull image")):
        info = job.wait(timeout=120)
        assert info.status.value == "failed" and len(info.attempts) == 1
        assert info.attempts[0].reason == "ImagePullFailed" and words in info.attempts[0].message


def test_a_server_sigkill_and_restart_finds_the_running_container_again(server, busybox):
    c = server.client()
    # it holds after line 3 until the test lets it go: on a loaded machine the test may read line 3 late,
    # and a container that had gone on would end before the kill, or while the server is down
    job = c.submit({"name": "long", "image": busybox,
                    "command": "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo line $i; "
                               "while [ $i = 3 ] && [ ! -e $TRAINYARD_CHECKPOINT_DIR/go ]; do sleep 0.05; done; "
                               "sleep 0.2; done"})
    until(lambda: "line 3" in job.logs(), timeout=60)
    server.kill()
    assert containers_of(job.id)  # still running without the server
    server.start()
    (server.home / "checkpoints" / job.id / "go").touch()  # the checkpoint dir: mounted at the same path
    c = server.client()
    info = c.wait(job.id, timeout=60)
    assert info.status.value == "succeeded" and len(info.attempts) == 1
    assert c.job(job.id).logs().splitlines() == [f"line {i}" for i in range(1, 16)]
    assert containers_of(job.id) == []


PYTORCHJOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: two-images}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: MASTER
              command: [sh, -c, 'echo "rank $RANK in $(cat /image-name)"']
    Worker:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: WORKER
              command: [sh, -c, 'echo "rank $RANK in $(cat /image-name)"']
"""


def test_a_pytorchjob_runs_each_replica_in_its_own_image(server, tmp_path):
    master, worker = images.busybox_image("master"), images.busybox_image("worker")
    manifest = tmp_path / "job.yaml"
    manifest.write_text(PYTORCHJOB.replace("MASTER", master).replace("WORKER", worker))
    job = server.client().submit(manifest)
    info = job.wait(timeout=90)
    assert info.status.value == "succeeded", job.logs()
    assert sorted(job.logs().splitlines()) == ["rank 0 in master", "rank 1 in worker"]
    assert containers_of(job.id) == []


def test_resource_samples_are_of_the_containers_processes(server, python_image):
    """The job's memory shows in ``system/memory_bytes``; podman's own client (tens of MiB) does not."""
    hold = 150 << 20
    job = server.client().submit({
        "name": "holder", "image": python_image, "resources": {"cpu": 1},
        "command": ["python3", "-c", f"x = bytearray({hold}); x[::4096] = b'1' * len(x[::4096]); "
                                     "print('holding', flush=True); import time; time.sleep(6)"]})
    info = job.wait(timeout=90)
    assert info.status.value == "succeeded", job.logs()
    samples = [m.value for m in job.metrics(system=True) if m.name == "system/memory_bytes"]
    assert samples and hold <= max(samples) < hold + (25 << 20), samples  # the bytes, python3 and its init


def test_stack_and_exec_reach_the_python_in_the_container(server, python_image):
    """py-spy on the node reads the container's python3 (its own binary, under the container's root)."""
    job = server.client().submit({
        "name": "deep", "image": python_image, "resources": {"cpu": 1},
        "command": ["python3", "-c", "import os, time\ndef score_batch():\n    print('scoring', flush=True)\n"
                                     "    time.sleep(120)\nopen(f'/tmp/in-{os.getpid()}-{time.time()}', 'w').close()\n"
                                     "score_batch()"]})
    until(lambda: "scoring" in job.logs(), timeout=90)
    [dump] = job.stacks(timeout=30)
    assert dump.status == "done", dump.error
    assert "score_batch (<string>:4)" in dump.text and "Python v3" in dump.text
    # and `trainyard exec` runs in the container: the file the job left in its own /tmp is there, not here
    inside = job.exec(["sh", "-c", "ls /tmp/in-*"], timeout=20)
    assert inside.status == "done" and inside.exit_code == 0, inside
    assert not Path(inside.output.strip()).exists()
    job.cancel()


GLOO = textwrap.dedent("""\
    import os, torch, torch.distributed as dist
    import trainyard
    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    trainyard.log_metrics(step=dist.get_rank(), total=t.item())
    print("rank", dist.get_rank(), "of", dist.get_world_size(), "sum", t.item(), "in", open("/etc/debian_version").read().strip())
    dist.destroy_process_group()
    """)


def test_two_replicas_in_an_image_rendezvous_over_gloo(server, python_image):
    """The image's Debian python3 imports this venv's torch, and trainyard as the product mounts it.

    Torch reaches the container as any user's host folder would: an input given as a local path is
    mounted at its own path, and ``PYTHONPATH`` names it. The product mounts only trainyard itself
    (standard library only, so any Python 3 imports it); it does not mount the host's site-packages,
    which would shadow the packages an image exists to provide, and whose compiled parts work only
    with the same Python minor version — checked first here.
    """
    torch = need_module("torch", "pip install 'trainyard[torch]'")
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    need(images.image_python_version(python_image) == host, f"the Debian image's python3 is not {host}")
    site = str(Path(torch.__file__).parents[1])
    job = server.client().submit({
        "name": "gloo", "image": python_image, "replicas": 2, "distributed": "torch", "resources": {"cpu": 1},
        "inputs": {"site": site}, "env_vars": {"PYTHONPATH": site},
        "command": ["python3", "-c", GLOO]})
    info = job.wait(timeout=180)
    assert info.status.value == "succeeded", job.logs()
    # each replica's own log: the job's log interleaves the replicas' chunks as they came, and a chunk may end
    # mid-line (one of these lines once came split around the other replica's)
    lines = sorted(line for r in (0, 1) for line in job.logs(replica=r).splitlines() if line.startswith("rank"))
    assert [line.split(" in ")[0] for line in lines] == ["rank 0 of 2 sum 3.0", "rank 1 of 2 sum 3.0"]
    assert all(not line.endswith(" in ") for line in lines)  # /etc/debian_version: the image's
    assert sorted(m.value for m in job.metrics() if m.name == "total") == [3.0, 3.0]


# -- Kubeflow components and pip ------------------------------------------------------------

COMPONENT = """\
name: Install and use
inputs:
- {name: wheel, type: Data}
implementation:
  container:
    image: IMAGE
    command:
    - sh
    - -c
    - |
      set -e
      d=$(mktemp -d); cp "$0" "$d/tinypkg-0.1-py3-none-any.whl"
      python3 -m pip install --no-index --break-system-packages --disable-pip-version-check -q "$d/tinypkg-0.1-py3-none-any.whl"
      python3 -c "import tinypkg, sys; print('component', tinypkg.VALUE, sys.prefix)"
    - {inputPath: wheel}
"""

PIPELINE = """\
name: pip
steps:
  gen:
    command: cp WHEEL {{outputs.wheel}}
    outputs: [wheel]
  use:
    component: component.yaml
    arguments: {wheel: "{{steps.gen.outputs.wheel}}"}
  plain:
    command: python -m pip install --no-index --disable-pip-version-check -q WHEEL && python -c "import tinypkg, sys; print('plain', tinypkg.VALUE, sys.prefix)"
"""


def pip_list() -> str:
    return subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("runtime", ["podman", "none"])
def test_a_component_that_pip_installs_leaves_the_servers_environment_alone(runtime, python_image, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    wheel = make_wheel(tmp_path)
    (project / "component.yaml").write_text(COMPONENT.replace("IMAGE", python_image))
    (project / "p.yaml").write_text(PIPELINE.replace("WHEEL", str(wheel)))
    before = pip_list()
    assert "tinypkg" not in before
    srv = ServerProcess(tmp_path / "home", ["--cpus", "4", "--memory", "4Gi", "--container-runtime", runtime])
    srv.start()
    try:
        c = srv.client()
        handle = c.pipelines.run(project / "p.yaml", {})
        info = c.pipelines.wait(handle.id, timeout=180)
        steps = {s.name: s for s in info.steps}
        logs = {name: "".join(chunk.data for chunk in c.logs(s.job_id)) for name, s in steps.items()}
        assert info.status.value == "succeeded", logs
    finally:
        srv.stop_all()
    component = next(line for line in logs["use"].splitlines() if line.startswith("component"))
    plain = next(line for line in logs["plain"].splitlines() if line.startswith("plain"))
    assert component.startswith("component 42 ") and plain.startswith("plain 42 ")
    # in the image: its own /usr; on the host: a virtualenv of the step's attempt, not the server's
    assert component.endswith(" /usr") if runtime == "podman" else "/attempts/" in component
    assert "/attempts/" in plain
    assert pip_list() == before


SYSTEMD = Path("/run/systemd/system").is_dir()  # systemd runs here: its cgroup manager works


@pytest.mark.parametrize("conf, change", [
    # an open-files limit above the kernel's nr_open: no host can set it, so the runtime fails as in a sandbox
    ('[containers]\ndefault_ulimits = ["nofile=4294967296:4294967296"]\n'
     '[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\n', "default_ulimits = []"),
    # podman's default cgroup manager where systemd does not run (as in this sandbox)
    ('[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "systemd"\nruntime = "runc"\n',
     None if SYSTEMD else 'cgroup_manager = "cgroupfs"'),
], ids=["rlimits", "systemd-cgroups"])
def test_a_runtime_that_cannot_start_containers_here_ends_setup_failed_saying_what_to_change(
        conf, change, busybox, tmp_path, monkeypatch):
    (tmp_path / "containers.conf").write_text(conf)
    monkeypatch.setenv("CONTAINERS_CONF", str(tmp_path / "containers.conf"))
    srv = ServerProcess(tmp_path / "home", ["--cpus", "1", "--memory", "1Gi", "--container-runtime", "podman"])
    srv.start()
    try:
        job = srv.client().submit({"name": "rl", "image": busybox, "command": "true"})
        info, logs = job.wait(timeout=60), job.logs()
    finally:
        srv.stop_all()
    if change is None:  # a host where the setting works
        assert info.status.value == "succeeded", logs
    else:
        assert info.status.value == "failed" and info.attempts[0].reason == "SetupFailed", logs
        assert change in info.attempts[0].message and "containers.conf" in info.attempts[0].message
    assert containers_of(job.id) == []


def test_a_container_whose_launcher_died_is_removed_by_the_server(server, busybox):
    job = server.client().submit({"name": "orphan", "image": busybox, "command": "echo up; sleep 300"})
    until(lambda: "up" in job.logs(), timeout=60)
    handle = json.loads((server.home / "attempts" / f"{job.id}-1" / "r0" / "launcher.json").read_text())
    os.kill(handle["pid"], signal.SIGKILL)  # nobody left to stop its container but the server
    info = job.wait(timeout=60)
    assert info.status.value == "failed" and info.attempts[0].reason == "LostContact"
    assert containers_of(job.id) == []


# busybox has no `id`: the shell reads from the kernel its uid, the capabilities it could ever have, and whether a
# setuid binary could give it more
IDS = 'while read k v r; do case "$k" in Uid:|CapBnd:|NoNewPrivs:) echo "$k $v";; esac; done < /proc/self/status'
CONFINED = ["Uid: 65534", "CapBnd: 0000000000000000", "NoNewPrivs: 1"]


def test_an_image_job_of_a_user_on_an_account_runs_as_it_in_roots_runtime(busybox):
    """The runtime stays root's (one store for pull, run, exec, rm; its --memory enforced); the job drops inside."""
    import shutil
    import tempfile

    from tests.e2e.test_identity import As, cli_as

    need(os.geteuid() == 0, "needs root to run jobs as another account")
    root = tempfile.mkdtemp(prefix="trainyard-iso-")
    os.chmod(root, 0o711)  # as test_identity's: the account passes through to its folders
    srv = ServerProcess(Path(root) / "home", ["--auth", "--cpus", "2", "--memory", "2Gi", "--container-runtime",
                                              "podman"])
    srv.start()
    try:
        admin = As(srv, (srv.home / "first-admin-token").read_text().strip())
        made = admin.post("/api/v1/users", json={"name": "alice", "team": "vision", "os_user": "nobody"}).json()
        token = made["token"]["secret"]
        alice = As(srv, token)
        # given an image only root's store has (never pulled), a job over its memory limit and one that waits
        greedy = alice.submit({"name": "greedy", "image": busybox, "image_pull_policy": "never",
                               "resources": {"memory": "64Mi", "cpu": 1}, "retry": {"max": 0},
                               "command": f"{IDS}; dd if=/dev/zero of=/dev/null bs=300M count=1"}).json()["id"]
        held = alice.submit({"name": "held", "image": busybox, "image_pull_policy": "never", "grace_period": 1,
                             "command": "echo up; sleep 300", "resources": {"cpu": 0.5}}).json()["id"]
        until(lambda: "up" in alice.get(f"/api/v1/jobs/{held}/logs").text, timeout=90)
        # when alice runs a command in the waiting one, it runs as her account, in the job's own container
        ran = cli_as(srv, token, "exec", held, "--", "sh", "-c", IDS)
        assert (ran.returncode, ran.stdout.splitlines()) == (0, CONFINED), ran.stderr
        alice.post(f"/api/v1/jobs/{held}/cancel")
        # then the greedy one ran as the account, ended OOMKilled, and no container of either is left
        c = srv.client()
        info, logs = c.wait(greedy, timeout=90), c.job(greedy).logs()
        assert info.status.value == "failed" and info.attempts[-1].reason == "OOMKilled", logs
        assert logs.splitlines()[:3] == CONFINED, logs
        assert c.wait(held, timeout=60).status.value == "cancelled"
        assert containers_of(greedy) == [] and containers_of(held) == []
    finally:
        srv.stop_all()
        shutil.rmtree(root, ignore_errors=True)
