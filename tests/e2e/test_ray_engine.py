"""The Ray engine against a real three-node Ray cluster on loopback.

Head: 1 CPU. cpu-worker: 2 CPUs, zone=a. gpu-worker: 2 CPUs, 2 declared GPUs
of type A100 (``gpu_type:A100``), zone=b: the session's shared cluster
(``shared_ray_cluster`` in tests/conftest.py). The node-loss test kills a worker,
so it runs last of all the shared cluster's users (``ray_cluster(kills_node=True)``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.conftest import need_module
from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp"


@pytest.fixture(scope="module")
def cluster(shared_ray_cluster):
    return shared_ray_cluster


@pytest.fixture
def server(cluster, tmp_path):
    srv = ServerProcess(tmp_path / "home", ["--engine", "ray", "--ray-address", cluster.address])
    srv.start(timeout=90)
    yield srv
    srv.stop()


def nodes_by_zone(server) -> dict[str | None, dict]:
    out = server.cli("nodes", "-o", "json")
    assert out.returncode == 0, out.stderr
    return {n["labels"].get("zone"): n for n in json.loads(out.stdout)}


def placement_groups(cluster, attempt_id: str) -> list:
    from ray.util.state import list_placement_groups

    return [p for p in list_placement_groups(address=cluster.address, limit=10_000)
            if p.name == f"trainyard-{attempt_id}"]


def live_actors(cluster, attempt_id: str) -> list:
    from ray.util.state import list_actors

    return [a for a in list_actors(address=cluster.address, limit=10_000)
            if (a.name or "").startswith(f"{attempt_id}-r") and a.state != "DEAD"]


def live_agents(cluster) -> set[str]:
    from ray.util.state import list_actors

    return {a.name for a in list_actors(address=cluster.address, limit=10_000)
            if (a.name or "").startswith("agent-") and a.state == "ALIVE"}


def released(cluster, attempt_id: str) -> bool:
    pgs = placement_groups(cluster, attempt_id)
    return bool(pgs) and all(p.state == "REMOVED" for p in pgs) and not live_actors(cluster, attempt_id)


def test_an_image_is_refused_at_submit_naming_the_field_and_not_stored(server):
    from trainyard.errors import Unsupported

    c = server.client()
    with pytest.raises(Unsupported, match="`image` is not supported there") as exc:
        c.submit(py_job("pass", image="python:3.11"))
    assert exc.value.details.get("field") == "image"
    assert c.jobs().items == []
    r = server.cli("run", "--image", "python:3.11", "--", "true")  # as a user meets it
    assert r.returncode != 0 and "image" in r.stderr


SHOW_PLACE = "import os; print('CUDA', repr(os.environ.get('CUDA_VISIBLE_DEVICES')), flush=True)"


def test_nodes_come_from_the_cluster_and_jobs_land_where_they_fit(server, cluster):
    nodes = nodes_by_zone(server)
    assert set(nodes) == {None, "a", "b"}
    assert (nodes[None]["cpu"], nodes[None]["gpu"]) == (1, 0)
    assert (nodes["a"]["cpu"], nodes["a"]["gpu"], nodes["a"]["gpu_type"]) == (2, 0, None)
    assert (nodes["b"]["cpu"], nodes["b"]["gpu"], nodes["b"]["gpu_type"]) == (2, 2, "A100")

    c = server.client()
    gpu = c.submit(py_job(SHOW_PLACE, resources={"cpu": 1, "gpu": 1, "gpu_type": "A100"}))
    zoned = c.submit(py_job(SHOW_PLACE, resources={"cpu": 1, "node_selector": {"zone": "a"}}))
    big = c.submit(py_job(SHOW_PLACE, resources={"cpu": 2, "memory": "1Gi"}))  # not on the 1-CPU head
    for job in (gpu, zoned, big):
        assert job.wait(timeout=90).status.value == "succeeded", job.logs()

    gpu_attempt = c.get(gpu.id).attempts[0]
    assert gpu_attempt.node == nodes["b"]["name"]
    assert "actor" in gpu_attempt.handle["replicas"][0]  # its own actor: Ray gives GPU ids only to one
    assert gpu.logs().strip() in ("CUDA '0'", "CUDA '1'")  # exactly the one GPU Ray gave the bundle
    assert c.get(zoned.id).attempts[0].node == nodes["a"]["name"]
    assert zoned.logs().strip() == "CUDA ''"
    assert c.get(big.id).attempts[0].node in (nodes["a"]["name"], nodes["b"]["name"])
    until(lambda: all(released(cluster, f"{j.id}-1") for j in (gpu, zoned, big)), timeout=20)


PG_STRATEGIES = """
import json, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR")
print(json.dumps({p["name"]: p["strategy"] for p in ray.util.placement_group_table().values()}))
"""


def strategy(cluster, attempt_id: str) -> str:
    out = subprocess.run([sys.executable, "-c", PG_STRATEGIES, cluster.address], check=True, timeout=120,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])[f"trainyard-{attempt_id}"]


def test_a_ddp_gang_spreads_over_two_nodes_and_trains(server, cluster):
    need_module("torch", "pip install 'trainyard[torch]'")
    from trainyard.spec.loader import load_job

    spec = load_job(EXAMPLE / "job.yaml", {"epochs": 2})
    # 1 CPU per replica: both would fit on one 2-CPU worker; only `placement: spread` parts them
    update = {"resources": spec.resources.model_copy(update={"cpu": 1.0, "memory": 2**30}), "placement": "spread"}
    job = server.client().submit(spec.model_copy(update=update), base_dir=EXAMPLE)
    info = job.wait(timeout=240)
    assert info.status.value == "succeeded", job.logs()
    replicas = info.attempts[0].replicas
    assert len({r.node for r in replicas}) == 2
    assert strategy(cluster, info.attempts[0].id) == "STRICT_SPREAD"
    assert [m.name for m in job.metrics()].count("test_accuracy") == 2
    assert "world size 2" in job.logs()  # both replicas met at replica 0's node address


def test_a_packed_gang_shares_a_node_and_its_placement_group_packs(server, cluster):
    # half a CPU per replica: they fit together on any node, or apart on any two
    job = server.client().submit(py_job("print('packed')", replicas=2, distributed="torch",
                                        resources={"cpu": 0.5, "memory": "256Mi"}))
    info = job.wait(timeout=120)
    assert info.status.value == "succeeded", job.logs()
    assert strategy(cluster, info.attempts[0].id) == "PACK"
    assert len({r.node for r in info.attempts[0].replicas}) == 1  # the planner packs them best-fit too


def test_cancel_stops_the_job_and_releases_its_placement_group_and_actors(server, cluster):
    c = server.client()
    job = c.submit(py_job("import time\nprint('started', flush=True)\ntime.sleep(300)", grace_period=2))
    until(lambda: "started" in job.logs(), timeout=60)
    attempt_id = f"{job.id}-1"
    assert placement_groups(cluster, attempt_id)[0].state == "CREATED"
    # no GPUs asked: the node's agent runs its launcher, no actor of its own
    [replica] = c.get(job.id).attempts[0].handle["replicas"]
    assert replica["agent"] in live_agents(cluster) and not live_actors(cluster, attempt_id)
    # where it is, dumped on its Ray node by its launcher (`trainyard stack`)
    [dump] = job.stacks(timeout=30)
    assert (dump.status, dump.node) == ("done", c.get(job.id).attempts[0].node) and "<module> (<string>:3)" in dump.text
    # and a command beside it there, in its environment (`trainyard exec`)
    ran = job.exec(["sh", "-c", "echo $TRAINYARD_JOB_ID"], timeout=20)
    assert (ran.status, ran.exit_code, ran.output, ran.node) == ("done", 0, f"{job.id}\n", dump.node)

    job.cancel()
    assert job.wait(timeout=30).status.value == "cancelled"
    until(lambda: released(cluster, attempt_id), timeout=20)
    assert c.get(job.id).attempts[0].reason == "Cancelled"


IGNORES_TERM = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the child: neither stops on SIGTERM
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
if sys.argv[1:] == ["freeze-launcher"]:  # then only the node's agent can kill it
    os.kill(os.getppid(), signal.SIGSTOP)
print('started', flush=True)
time.sleep(600)
"""


def processes_of(job_id: str) -> list:
    """Every live process of the job's first attempt on this machine: its launcher and all the job started."""
    found = []
    for p in psutil.process_iter():
        try:
            if (p.status() != psutil.STATUS_ZOMBIE and (f"/attempts/{job_id}-1/" in " ".join(p.cmdline())
                                                       or p.environ().get("TRAINYARD_JOB_ID") == job_id)):
                found.append(p)
        except psutil.Error:
            pass
    return found


@pytest.mark.parametrize("freeze", [False, True], ids=["launcher-kills", "agent-kills"])
def test_a_cancelled_job_that_ignores_sigterm_is_killed_after_its_grace_period(server, cluster, freeze):
    from trainyard.engines.ray.actor import KILL_SLACK

    c = server.client()
    job = c.submit({"name": "defiant", "grace_period": 1,
                    "command": [sys.executable, "-c", IGNORES_TERM, *(["freeze-launcher"] if freeze else [])]})

    def set_up() -> bool:  # the launcher, the command, the command's child; the launcher frozen if asked
        procs = processes_of(job.id)
        return len(procs) == 3 and (not freeze or any(p.status() == psutil.STATUS_STOPPED for p in procs))

    until(set_up, timeout=60, every=0.2)  # not the log: a frozen launcher sends none

    job.cancel()
    info = job.wait(timeout=1 + KILL_SLACK + 30)  # the grace period, the agent's slack, a loaded machine's margin
    assert info.status.value == "cancelled" and info.attempts[0].reason == "Cancelled"
    # nothing of it is left (the engine's overdue-cancel backstop would end the attempt, but leave them all)
    until(lambda: not processes_of(job.id), timeout=10)  # a launcher that reported may still be closing its log
    until(lambda: released(cluster, f"{job.id}-1"), timeout=20)


def test_env_pip_is_the_launchers_cached_virtualenv_on_the_node(server, tmp_path):
    from tests.integration.test_launcher_pyenv import BACKEND, PYPROJECT

    code = tmp_path / "code"
    (code / "tinypkg" / "tinypkg").mkdir(parents=True)  # a local package: builds offline
    (code / "tinypkg" / "pyproject.toml").write_text(PYPROJECT)
    (code / "tinypkg" / "tinybackend.py").write_text(BACKEND)
    (code / "tinypkg" / "tinypkg" / "__init__.py").write_text("ANSWER = 42\n")
    job = server.client().submit({"name": "venv", "workdir": ".", "env": {"pip": ["./tinypkg"]},
                                  "command": ["python", "-c", "import sys, tinypkg; print(tinypkg.ANSWER, sys.prefix)"]},
                                 base_dir=code)
    assert job.wait(timeout=120).status.value == "succeeded", job.logs()
    answer, prefix = job.logs().splitlines()[-1].split()
    assert answer == "42" and Path(prefix).parent == server.home / "venvs"


def test_a_secret_reaches_a_job_on_a_ray_node_and_leaves_ray_unaware(server, cluster):
    value = "ray-secret-" + "Wd5" * 8
    c = server.client()
    c.secrets.set("token", value)
    job = c.submit({"name": "ray-secret", "secrets": {"TOKEN": "token"},
                    "command": ["python", "-c", "import os; print(len(os.environ['TOKEN']), os.environ['TOKEN'])"]})
    assert job.wait(timeout=120).status.value == "succeeded", job.logs()
    assert job.logs().splitlines()[-1] == f"{len(value)} " + "*" * len(value)
    # the launcher's config travels through Ray (the agent's call): none of Ray's files (its sessions' logs,
    # under the cluster's --temp-dir) holds the value
    scanned, holding = 0, []
    for path in cluster.temp.rglob("*"):
        try:
            if path.is_file():
                scanned += 1
                if value.encode() in path.read_bytes():
                    holding.append(str(path))
        except OSError:
            pass
    assert scanned > 10 and holding == []


HOLD_ZONE_A = """
import sys, ray
from ray.util.placement_group import placement_group
ray.init(address=sys.argv[1], namespace="someone-else")
pg = placement_group([{"CPU": 2}], name="hold-zone-a", lifetime="detached", bundle_label_selector=[{"zone": "a"}])
ray.get(pg.ready(), timeout=60)
"""
RELEASE_ZONE_A = """
import sys, ray
ray.init(address=sys.argv[1], namespace="someone-else")
ray.util.remove_placement_group(ray.util.get_placement_group("hold-zone-a"))
"""


def ray_script(cluster, code: str) -> None:
    subprocess.run([sys.executable, "-c", code, cluster.address], check=True, timeout=120, capture_output=True)


def test_cancel_of_a_gang_ray_has_not_placed_yet_removes_its_placement_group(server, cluster):
    ray_script(cluster, HOLD_ZONE_A)  # another Ray user holds zone a: trainyard's plan cannot know
    try:
        c = server.client()
        job = c.submit(py_job("print('ran')", resources={"cpu": 2, "node_selector": {"zone": "a"}}))
        attempt_id = f"{job.id}-1"
        until(lambda: [p.state for p in placement_groups(cluster, attempt_id)] == ["PENDING"], timeout=30)
        assert c.get(job.id).status.value == "starting"

        job.cancel()
        assert job.wait(timeout=30).status.value == "cancelled"
        try:
            until(lambda: released(cluster, attempt_id), timeout=20)
        except AssertionError:
            raise AssertionError(f"{placement_groups(cluster, attempt_id)} {live_actors(cluster, attempt_id)}")
        assert "ran" not in job.logs()
    finally:
        ray_script(cluster, RELEASE_ZONE_A)


def test_the_control_plane_restarts_while_ray_keeps_the_job_running(server, cluster):
    c = server.client()
    job = c.submit(py_job("import time\nfor i in range(60):\n    print(f'line {i}', flush=True); time.sleep(0.25)"))
    until(lambda: "line 3" in job.logs(), timeout=60)

    server.kill()  # SIGKILL: the Ray driver goes with it; the detached actors stay
    server.start(timeout=90)

    c = server.client()
    assert c.get(job.id).status.value == "running"  # found again through its named actor, still at work
    info = c.wait(job.id, timeout=60)
    assert info.status.value == "succeeded" and len(info.attempts) == 1
    assert c.job(job.id).logs().splitlines() == [f"line {i}" for i in range(60)]
    until(lambda: released(cluster, f"{job.id}-1"), timeout=20)


RESUMABLE = """
import os, pathlib, time
ck = pathlib.Path(os.environ["TRAINYARD_CHECKPOINT_DIR"]) / "step"
start = int(ck.read_text()) + 1 if ck.exists() else 0
print(f"resuming from {start}", flush=True)
for i in range(start, 30):
    # written aside, then renamed: a node killed mid-write must not leave a torn checkpoint
    (ck.parent / "step.tmp").write_text(str(i)); os.replace(ck.parent / "step.tmp", ck)
    print(f"step {i}", flush=True); time.sleep(0.2)
"""


def test_a_cordoned_node_takes_no_work_and_a_drain_moves_its_job_to_another_node(server, cluster):
    c = server.client()
    nodes = nodes_by_zone(server)
    a, b = nodes["a"]["name"], nodes["b"]["name"]
    c.cordon(a, reason="firmware")
    job = c.submit(py_job(RESUMABLE, resources={"cpu": 2}))  # fits a or b, not the head: b, a being cordoned
    until(lambda: "step 3" in job.logs(), timeout=60)
    first = c.get(job.id).attempts[0]
    assert first.node == b
    c.uncordon(a)
    drained = c.drain(b, reason="replace a GPU", wait=60)
    assert drained.stopped == [first.id] and drained.node.attempts == 0 and drained.node.cordon.drained_at
    info = c.wait(job.id, timeout=90)
    assert info.status.value == "succeeded", job.logs()
    assert [(x.reason, x.node) for x in info.attempts] == [("NodeDrained", b), ("Succeeded", a)]
    assert int(job.logs(attempt=2).split("resuming from ")[1].split()[0]) >= 3
    until(lambda: released(cluster, first.id), timeout=20)
    assert nodes_by_zone(server)["b"]["cordon"]["reason"] == "replace a GPU"


@pytest.mark.ray_cluster(kills_node=True)
def test_a_lost_node_ends_the_attempt_as_node_lost_and_the_retry_resumes_elsewhere(server, cluster):
    c = server.client()
    job = c.submit(py_job(RESUMABLE, resources={"cpu": 2}, retry={"max": 2, "backoff": 0}))
    until(lambda: "step 5" in job.logs(), timeout=60)
    nodes = nodes_by_zone(server)
    first = c.get(job.id).attempts[0]
    zone = next(z for z, n in nodes.items() if n["name"] == first.node)
    victim = next(n for n in cluster.nodes if n.tags.get("zone") == zone)

    victim.kill()
    until(lambda: c.get(job.id).attempts[0].reason == "NodeLost", timeout=20,
          show=lambda: [(a.reason, a.message) for a in c.get(job.id).attempts])
    info = c.wait(job.id, timeout=90)
    assert info.status.value == "succeeded", job.logs()
    assert len(info.attempts) == 2 and info.attempts[1].node not in (first.node, None)
    resumed = int(job.logs(attempt=2).split("resuming from ")[1].split()[0])
    assert resumed >= 5
    until(lambda: released(cluster, first.id), timeout=20)
    until(lambda: zone not in nodes_by_zone(server), timeout=10)  # a node that left is gone from `nodes`

    cluster.add_worker("late-worker", cpus=2, labels={"zone": "c"})  # and one that joins shows up
    until(lambda: "c" in nodes_by_zone(server), timeout=10)
    late = c.submit(py_job("print('late')", resources={"cpu": 1, "node_selector": {"zone": "c"}}))
    assert late.wait(timeout=60).status.value == "succeeded"


def test_an_unreachable_cluster_is_named_at_once(tmp_path):
    from tests.support.ray_cluster import free_port

    env = {**os.environ, "TRAINYARD_HOME": str(tmp_path)}
    env.pop("RAY_ADDRESS", None)
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    out = subprocess.run([sys.executable, "-m", "trainyard", "server", "--engine", "ray", "--ray-address", address],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and f"cannot reach the Ray cluster at '{address}'" in out.stderr
    out = subprocess.run([sys.executable, "-m", "trainyard", "server", "--engine", "ray"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "--ray-address" in out.stderr
