"""Ray nodes that share no filesystem: each keeps its replica folders and checkpoints under a root
of its own (``TRAINYARD_NODE_ROOT``), and artifacts are on an S3-compatible server (moto on
loopback). A job killed with its node resumes on another node from the checkpoint restored from S3.

A cluster of its own (head + two workers), so that the shared one of test_ray_engine keeps its nodes.
"""

from __future__ import annotations

import pytest

from tests.conftest import need
from tests.e2e.helpers import py_job, until
from tests.support.s3 import moto_s3
from tests.support.servers import ServerProcess

# the first test carries its own three-node cluster's start (each `ray start` waits its turn machine-wide)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

RESUMABLE = """
import os, pathlib, time, trainyard
ck = trainyard.checkpoint_dir()
start = int((ck / "step").read_text()) + 1 if (ck / "step").exists() else 0
print(f"resuming from {start} in {ck}", flush=True)
for i in range(start, 30):
    (ck / "step.tmp").write_text(str(i)); os.replace(ck / "step.tmp", ck / "step")
    trainyard.checkpoint_saved(wait=True)  # in the bucket before the step is announced
    print(f"step {i}", flush=True); time.sleep(0.2)
"""


@pytest.fixture(scope="module")
def s3():
    with moto_s3() as server:  # first: the nodes inherit its credentials from this process
        yield server


@pytest.fixture(scope="module")
def cluster(s3, tmp_path_factory):
    try:
        import ray  # noqa: F401
    except ImportError:
        ray = None
    need(ray is not None, "ray is not installed (pip install 'trainyard[ray]')")
    from tests.support.ray_cluster import RayCluster, ray_bin

    base = tmp_path_factory.mktemp("rs")  # short: Ray's socket paths under it must fit in 107 bytes
    c = RayCluster(base, ray_bin())
    try:
        c.start_head(env={"TRAINYARD_NODE_ROOT": str(base / "root-head")})
        for zone in ("a", "b"):
            c.add_worker(f"worker-{zone}", cpus=2, labels={"zone": zone},
                         env={"TRAINYARD_NODE_ROOT": str(base / f"root-{zone}")})
    except BaseException:
        c.stop()
        raise
    c.roots = {zone: base / f"root-{zone}" for zone in ("a", "b")}
    yield c
    c.stop()


def test_a_lost_node_resumes_elsewhere_from_the_checkpoint_restored_from_s3(s3, cluster, tmp_path):
    bucket = s3.bucket()
    server = ServerProcess(tmp_path / "home", ["--engine", "ray", "--ray-address", cluster.address,
                                               "--artifacts", f"s3://{bucket}/ty", "--s3-endpoint-url", s3.endpoint])
    server.start(timeout=90)
    try:
        c = server.client()
        job = c.submit(py_job(RESUMABLE, resources={"cpu": 2}, retry={"max": 2, "backoff": 0}))
        until(lambda: "step 5" in job.logs(), timeout=90)
        first = c.get(job.id).attempts[0]
        zone = next(z for z, root in cluster.roots.items() if (root / "attempts" / first.id).is_dir())
        other = "b" if zone == "a" else "a"
        assert f"in {cluster.roots[zone] / 'checkpoints' / job.id}" in job.logs()  # the node's own root

        next(n for n in cluster.nodes if n.tags.get("zone") == zone).kill()
        info = c.wait(job.id, timeout=120)
        assert info.status.value == "succeeded", job.logs()
        assert len(info.attempts) == 2 and info.attempts[0].reason == "NodeLost"
        second = job.logs(attempt=2)
        assert f"in {cluster.roots[other] / 'checkpoints' / job.id}" in second  # nothing shared with the first
        assert int(second.split("resuming from ")[1].split()[0]) >= 5, second
        assert "checkpoint restored from s3://" in second
        assert (cluster.roots[other] / "checkpoints" / job.id / "step").read_text() == "29"
        assert not (server.home / "checkpoints" / job.id).exists()  # the server's home was never a node's
        assert f"ty/jobs/{job.id}/checkpoints/manifest.json" in s3.keys(bucket)
    finally:
        server.stop()


SAVES = """
import os, trainyard
(trainyard.checkpoint_dir() / "step").write_text("7")
trainyard.checkpoint_saved(wait=True)
open(os.path.join(trainyard.output_dir(), "model.txt"), "w").write("model")
print("trained", flush=True)
"""


def test_retention_sweeps_a_nodes_folders_through_its_agent_and_the_checkpoint_sets_in_s3(s3, cluster, tmp_path):
    bucket = s3.bucket()
    config = tmp_path / "server.yaml"
    config.write_text("retention: {work_dirs: 3s, checkpoints: 3s, every: 0.5s}\n")
    server = ServerProcess(tmp_path / "home", ["--engine", "ray", "--ray-address", cluster.address, "--config",
                                               str(config), "--artifacts", f"s3://{bucket}/ty",
                                               "--s3-endpoint-url", s3.endpoint])
    server.start(timeout=90)
    try:
        c = server.client()
        job = c.submit(py_job(SAVES, resources={"cpu": 1}))
        assert job.wait(timeout=90).status.value == "succeeded", job.logs()
        attempt = c.get(job.id).attempts[0].id
        roots = [*cluster.roots.values(), cluster.roots["a"].parent / "root-head"]
        root = next(r for r in roots if (r / "attempts" / attempt).is_dir())  # the node's own root, not the server's
        assert (root / "checkpoints" / job.id / "step").read_text() == "7"
        assert any(k.startswith(f"ty/jobs/{job.id}/checkpoints/") for k in s3.keys(bucket))

        until(lambda: not (root / "attempts" / attempt / "r0" / "work").exists()
              and not (root / "checkpoints" / job.id).exists(), timeout=30)
        assert "trained" in (root / "attempts" / attempt / "r0" / "output.log").read_text()  # its records stay
        until(lambda: not any(k.startswith(f"ty/jobs/{job.id}/checkpoints/") for k in s3.keys(bucket)), timeout=10)
        assert f"ty/jobs/{job.id}/1/outputs/model.txt" in s3.keys(bucket)  # outputs are not the sweeps'
        assert "trained" in job.logs()
    finally:
        server.stop()
