"""A server whose artifact store is a bucket on a real S3-compatible server (moto on loopback):
snapshots, outputs, pipeline artifacts and full logs land in it and come back intact; what is
missing or corrupt there is reported with its key; a store it cannot use stops it at start."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.helpers import py_job
from tests.support.s3 import moto_s3, strict_moto_s3
from tests.support.servers import ServerProcess
from trainyard.errors import ObjectCorrupt, ObjectMissing

pytestmark = pytest.mark.slow

MODEL = bytes(range(256)) * 4000  # 1 MB


@pytest.fixture(scope="module")
def s3():
    with moto_s3() as server:
        yield server


@pytest.fixture
def s3_server(s3, tmp_path):
    bucket = s3.bucket()
    srv = ServerProcess(tmp_path / "home", ["--artifacts", f"s3://{bucket}/ty", "--s3-endpoint-url", s3.endpoint,
                                            "--cpus", "2", "--memory", "4Gi", "--container-runtime", "none"])
    srv.start()
    srv.bucket = bucket
    yield srv
    srv.stop_all()


def test_snapshot_outputs_and_log_land_in_the_bucket_and_download_intact(s3, s3_server, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(
        "import trainyard\n"
        "print('training on', open('data.txt').read())\n"
        "(trainyard.output_dir() / 'model.bin').write_bytes(bytes(range(256)) * 4000)\n")
    (code / "data.txt").write_text("the data")
    job = s3_server.client().submit({"name": "s3", "command": [sys.executable, "train.py"], "workdir": "."},
                                    base_dir=code)
    assert job.wait(timeout=120).status.value == "succeeded", job.logs()

    keys = s3.keys(s3_server.bucket)
    snapshot = [k for k in keys if k.startswith("ty/snapshots/sha256-")]
    assert len(snapshot) == 1 and job.info.snapshot.replace(":", "-") in snapshot[0]
    assert f"ty/jobs/{job.id}/1/outputs/model.bin" in keys
    assert "training on the data" in s3.get(s3_server.bucket, f"ty/jobs/{job.id}/1/logs/replica-0.log").decode()
    assert not [k for k in keys if k.endswith(".part")]  # no temporary object left behind
    [record] = job.outputs()
    assert record.path == "model.bin" and record.size == len(MODEL)
    assert (job.download(tmp_path / "dl") / "model.bin").read_bytes() == MODEL


def test_a_corrupt_or_missing_output_is_reported_with_its_key(s3, s3_server, tmp_path):
    code = "import trainyard; (trainyard.output_dir() / 'model.bin').write_bytes(bytes(range(256)) * 4000)"
    job = s3_server.client().submit(py_job(code))
    assert job.wait(timeout=120).status.value == "succeeded", job.logs()
    key = f"ty/jobs/{job.id}/1/outputs/model.bin"
    url = f"s3://{s3_server.bucket}/{key}"

    s3.put(s3_server.bucket, key, b"\0" * len(MODEL))  # same size, other bytes: found at the end
    with pytest.raises(ObjectCorrupt, match="model.bin"):
        job.download(tmp_path / "a")
    assert not (tmp_path / "a" / "model.bin").exists() and not list((tmp_path / "a").glob(".*.part"))
    server_log = s3_server.log_path.read_text()
    assert f"object {url} is corrupt: read sha256:" in server_log and "Traceback" not in server_log

    s3.put(s3_server.bucket, key, b"short")  # another size: refused before the first byte
    with pytest.raises(ObjectCorrupt, match=f"object {url} is corrupt: stored 5 bytes"):
        job.download(tmp_path / "b")
    s3.delete(s3_server.bucket, key)
    with pytest.raises(ObjectMissing, match=f"object {url} is missing"):
        job.download(tmp_path / "c")
    r = s3_server.cli("download", job.id, "--to", str(tmp_path / "d"))
    assert r.returncode == 1 and f"object {url} is missing" in r.stderr and "Traceback" not in r.stderr


PIPELINE = '''\
name: s3
steps:
  make:
    command: python -c "open('{{outputs.model}}', 'w').write('weights 42')"
    outputs: [model]
  use:
    inputs: {model: "{{steps.make.outputs.model}}"}
    command: python -c "open('{{outputs.report}}', 'w').write('read ' + open('{{inputs.model}}').read())"
    outputs: [report]
'''


def test_a_pipeline_passes_an_artifact_through_the_bucket(s3, s3_server, tmp_path):
    (tmp_path / "p.yaml").write_text(PIPELINE)
    r = s3_server.cli("pipeline", "run", str(tmp_path / "p.yaml"), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stderr.split("started ", 1)[1].split()[0]
    c = s3_server.client()
    steps = {s.name: s for s in c.pipelines.get(run_id).steps}
    made = c.pipelines.artifact(steps["make"].artifacts["model"])
    report = c.pipelines.artifact(steps["use"].artifacts["report"])
    assert made.url.startswith(f"s3://{s3_server.bucket}/ty/jobs/")
    assert s3.get(s3_server.bucket, report.url.removeprefix(f"s3://{s3_server.bucket}/")) == b"read weights 42"


def test_wrong_credentials_stop_the_server_at_start_with_a_plain_error(tmp_path):
    with strict_moto_s3() as endpoint:
        r = subprocess.run([sys.executable, "-m", "trainyard", "server", "--home", str(tmp_path / "home"),
                            "--artifacts", "s3://bucket/ty", "--s3-endpoint-url", endpoint],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "error: artifact store s3://bucket/ty: cannot write .trainyard-probe-" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_second_job_with_the_same_input_finds_it_in_the_node_cache(s3, s3_server, tmp_path):
    data = s3.bucket()
    s3.put(data, "train/a.txt", b"alpha")
    s3.put(data, "train/sub/b.txt", b"beta")
    read = ("import os; d = os.environ['TRAINYARD_INPUT_DATA']; "
            "print('got', open(d + '/a.txt').read(), open(d + '/sub/b.txt').read(), d)")
    job = py_job(read, inputs={"data": f"s3://{data}/train/"})
    c = s3_server.client()
    first = c.submit(job)
    assert first.wait(timeout=120).status.value == "succeeded", first.logs()
    assert "got alpha beta" in first.logs()
    cache = s3_server.home / "cache" / "inputs"
    [entry] = [p for p in cache.iterdir() if p.is_dir()]
    (entry / "train" / "a.txt").write_text("from the cache")  # what a second download would overwrite

    second = c.submit(job)
    assert second.wait(timeout=120).status.value == "succeeded", second.logs()
    assert "got from the cache beta" in second.logs()

    s3.put(data, "train/a.txt", b"changed")  # a new ETag: fetched again, into a new entry
    third = c.submit(job)
    assert third.wait(timeout=120).status.value == "succeeded", third.logs()
    assert "got changed beta" in third.logs()
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2
