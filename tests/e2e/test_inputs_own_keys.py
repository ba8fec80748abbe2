"""A real server whose store is a bucket its node's keys reach, and a dataset in another bucket that only the job's
own keys (team secrets) may read, on an S3 server that checks IAM (moto): the job reads its input with its secrets,
and without them it fails naming the input, however the node's keys could reach it."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import py_job
from tests.integration.test_inputs_as_job import READ, world  # noqa: F401  (world is a fixture)
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def server(world, tmp_path, monkeypatch):  # noqa: F811
    for name in [n for n in __import__("os").environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    keys = world.keys["node_store"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys[1])
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    srv = ServerProcess(tmp_path / "home", ["--artifacts", "s3://store/ty", "--s3-endpoint-url", world.endpoint,
                                            "--cpus", "2", "--memory", "4Gi", "--container-runtime", "none"])
    srv.start()
    yield srv
    srv.stop_all()


def test_a_jobs_input_is_read_with_its_own_secrets_not_the_nodes_keys(world, server):  # noqa: F811
    c = server.client()
    c.secrets.set("data-key-id", world.keys["alice"][0])
    c.secrets.set("data-key", world.keys["alice"][1])
    inputs = {"data": "s3://data/train/"}
    own = c.submit(py_job(READ, inputs=inputs,
                          secrets={"AWS_ACCESS_KEY_ID": "data-key-id", "AWS_SECRET_ACCESS_KEY": "data-key"}))
    assert own.wait(timeout=120).status.value == "succeeded", own.logs()
    assert "got alpha beta" in own.logs()

    # the node's keys reach the store only: a job without keys of its own gets nothing, cached or not
    bare = c.submit(py_job(READ, inputs=inputs))
    info = bare.wait(timeout=120)
    assert info.status.value == "failed"
    assert "input 'data': cannot fetch s3://data/train/" in bare.logs() and "got" not in bare.logs()
