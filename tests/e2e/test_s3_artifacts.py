"""A server whose artifact store is a bucket on a real S3-compatible server (moto on loopback):
snapshots, outputs, pipeline artifacts and full logs land in it and come back intact; what is
missing or corrupt there is reported with its key; a store it cannot use stops it at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from tests.conftest import need_readonly_mounts
from tests.e2e.helpers import py_job, until
from tests.support.s3 import moto_s3, strict_moto_s3
from tests.support.servers import ServerProcess
from trainyard.errors import ObjectCorrupt, ObjectMissing
from trainyard.sdk.client import Client

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


def test_the_log_kept_in_the_bucket_shows_a_secret_masked(s3, s3_server):
    value = "s3-kept-" + "Vb3" * 9
    c = s3_server.client()
    c.secrets.set("token", value)
    job = c.submit({"name": "s3-secret", "command": [sys.executable, "-c", "import os; print('t=' + os.environ['T'])"],
                    "secrets": {"T": "token"}})
    assert job.wait(timeout=120).status.value == "succeeded", job.logs()
    kept = s3.get(s3_server.bucket, f"ty/jobs/{job.id}/1/logs/replica-0.log").decode()
    assert kept == "t=" + "*" * len(value) + "\n" == job.logs()
    assert not [k for k in s3.keys(s3_server.bucket) if "masked" in k]


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
    # the client checks the digest itself and may finish before the server logs what it found
    server_log = until(lambda: (t := s3_server.log_path.read_text()) and f"object {url} is corrupt: read sha256:" in t
                       and t, timeout=30)
    assert "Traceback" not in server_log

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


def test_a_second_job_with_the_same_input_finds_it_in_the_node_cache_intact(s3, s3_server, tmp_path):
    root = os.geteuid() == 0
    if root:  # a root job's input is read-only only through its own mount namespace
        need_readonly_mounts()
    data = s3.bucket()
    s3.put(data, "train/a.txt", b"alpha")
    s3.put(data, "train/sub/b.txt", b"beta")
    # the job uses the node's cached copy in place, and must not be able to change it for the next job
    # (as root too: the launcher gives it a read-only mount of the cache entry)
    read = ("import os; d = os.environ['TRAINYARD_INPUT_DATA']; "
            "print('got', open(d + '/a.txt').read(), open(d + '/sub/b.txt').read(), d)\n"
            "for how in (lambda: open(d + '/a.txt', 'a').write('x'), lambda: open(d + '/new', 'w'),\n"
            "            lambda: os.remove(d + '/sub/b.txt')):\n"
            "    try: how(); print('written')\n"
            "    except OSError as e: print('refused', e.strerror)")
    job = py_job(read, inputs={"data": f"s3://{data}/train/"})
    c = s3_server.client()
    first = c.submit(job)
    assert first.wait(timeout=120).status.value == "succeeded", first.logs()
    assert "got alpha beta" in first.logs()
    assert first.logs().count("refused") == 3 and "written" not in first.logs(), first.logs()
    assert ("Read-only file system" if root else "Permission denied") in first.logs()
    cache = s3_server.home / "cache" / "inputs"
    [entry] = [p for p in cache.iterdir() if p.is_dir()]
    inode = (entry / "train" / "a.txt").stat().st_ino  # a second download would land as new files

    second = c.submit(job)
    assert second.wait(timeout=120).status.value == "succeeded", second.logs()
    assert "got alpha beta" in second.logs()
    assert (entry / "train" / "a.txt").stat().st_ino == inode and not (entry / "train" / "new").exists()

    s3.put(data, "train/a.txt", b"changed")  # a new ETag: fetched again, into a new entry
    third = c.submit(job)
    assert third.wait(timeout=120).status.value == "succeeded", third.logs()
    assert "got changed beta" in third.logs()
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2


SAVES_THEN_FAILS = """
import os, pathlib, sys, trainyard
ck = trainyard.checkpoint_dir()
attempt = int(os.environ["TRAINYARD_ATTEMPT"])
print(f"attempt {attempt} resumes at", (ck / "step").read_text() if (ck / "step").exists() else None,
      "scratch" if (ck / "scratch.tmp").exists() else "", flush=True)
def save(n):
    (ck / "step.tmp").write_text(str(n)); os.replace(ck / "step.tmp", ck / "step")
if attempt == 1:
    save(3)
    assert trainyard.checkpoint_saved(wait=True)
    save(4)  # not said: the end of the attempt syncs it
    (ck / "scratch.tmp").write_text("being written")  # *.tmp is never part of a set
    sys.exit(1)
"""


def test_a_retry_resumes_from_the_set_synced_at_the_end_of_the_attempt(s3, s3_server):
    job = s3_server.client().submit(py_job(SAVES_THEN_FAILS, retry={"max": 1, "backoff": 0}))
    assert job.wait(timeout=120).status.value == "succeeded", job.logs()
    # restored from the bucket: the local scratch file, in no set, is gone
    second = job.logs(attempt=2)
    assert "attempt 2 resumes at 4 \n" in second and "checkpoint restored from s3://" in second, second
    manifest = json.loads(s3.get(s3_server.bucket, f"ty/jobs/{job.id}/checkpoints/manifest.json"))
    assert list(manifest["files"]) == ["step"] and manifest["attempt"] == 1


SAVES_ON_SIGTERM = """
import os, signal, sys, time, trainyard
ck = trainyard.checkpoint_dir()
def on_term(signum, frame):
    (ck / "step.tmp").write_text("saved on SIGTERM"); os.replace(ck / "step.tmp", ck / "step")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
time.sleep(300)
"""


def test_a_cancelled_job_syncs_what_it_saved_in_its_grace_period(s3, s3_server):
    job = s3_server.client().submit(py_job(SAVES_ON_SIGTERM, grace_period=30))
    until(lambda: "ready" in job.logs(), timeout=60)
    job.cancel()
    assert job.wait(timeout=60).status.value == "cancelled"
    manifest = json.loads(s3.get(s3_server.bucket, f"ty/jobs/{job.id}/checkpoints/manifest.json"))
    [blob] = [k for k in s3.keys(s3_server.bucket) if k.startswith(f"ty/jobs/{job.id}/checkpoints/blobs/")]
    assert manifest["files"]["step"]["digest"].replace(":", "-") in blob
    assert s3.get(s3_server.bucket, blob) == b"saved on SIGTERM"


def test_a_corrupt_checkpoint_fails_the_next_attempt_naming_its_key(s3, s3_server):
    code = ("import os, sys, trainyard; (trainyard.checkpoint_dir() / 'step').write_text('1'); "
            "sys.exit(1 if os.environ['TRAINYARD_ATTEMPT'] == '1' else 0)")
    # the backoff is the window in which the test damages the set between the two attempts
    job = s3_server.client().submit(py_job(code, retry={"max": 1, "backoff": 15}))
    until(lambda: job.refresh().attempts and job.info.attempts[0].status.is_terminal(), timeout=60)
    prefix = f"ty/jobs/{job.id}/checkpoints/blobs/"
    [blob] = [k for k in s3.keys(s3_server.bucket) if k.startswith(prefix)]
    s3.put(s3_server.bucket, blob, b"2")  # same size, other bytes
    (s3_server.home / "checkpoints" / job.id / "step").unlink()  # so the next attempt must fetch it
    info = job.wait(timeout=120)
    assert info.status.value == "failed" and info.attempts[1].reason == "SetupFailed"
    url = f"s3://{s3_server.bucket}/{blob}"
    assert f"checkpoint object {url} is corrupt: read sha256:" in info.attempts[1].message
    assert "Traceback" not in job.logs(attempt=2)


class CutsFirstStream(httpx.BaseTransport):
    """A real HTTP transport whose first output download breaks off after ``after`` bytes; records
    every request's Range header."""

    def __init__(self, after: int) -> None:
        self.inner, self.after, self.ranges = httpx.HTTPTransport(), after, []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if "/outputs/" not in request.url.path:
            return response
        self.ranges.append(request.headers.get("Range"))
        if len(self.ranges) > 1:
            return response
        stream, after = response.stream, self.after

        class Cut(httpx.SyncByteStream):
            def __iter__(self):
                sent = 0
                for chunk in stream:
                    yield chunk[: after - sent]
                    sent += len(chunk)
                    if sent >= after:
                        raise httpx.ReadError("connection reset (cut by the test)")

            def close(self) -> None:
                stream.close()

        return httpx.Response(response.status_code, headers=response.headers, stream=Cut(), request=request)


def test_an_interrupted_download_resumes_from_its_part_with_a_range_request(s3_server, tmp_path, monkeypatch):
    code = "import trainyard; (trainyard.output_dir() / 'model.bin').write_bytes(bytes(range(256)) * 4000)"
    job = s3_server.client().submit(py_job(code))
    assert job.wait(timeout=120).status.value == "succeeded", job.logs()
    url = f"{s3_server.url}/api/v1/jobs/{job.id}/outputs/model.bin"
    auth = {"Authorization": f"Bearer {s3_server.token}"}

    r = httpx.get(url, headers={**auth, "Range": "bytes=300000-"})
    assert r.status_code == 206 and r.content == MODEL[300_000:]
    assert r.headers["Content-Range"] == f"bytes 300000-{len(MODEL) - 1}/{len(MODEL)}"
    r = httpx.get(url, headers={**auth, "Range": f"bytes={len(MODEL)}-"})
    assert r.status_code == 416 and r.headers["Content-Range"] == f"bytes */{len(MODEL)}"

    # a stream cut off mid-way goes on from where it stopped, and the whole file's digest is checked
    cut = CutsFirstStream(after=250_000)
    client = Client(s3_server.url, token=s3_server.token, transport=cut)
    assert (client.download(job.id, tmp_path / "a") / "model.bin").read_bytes() == MODEL
    assert cut.ranges[0] is None and cut.ranges[1].startswith("bytes=") and int(cut.ranges[1][6:-1]) > 0
    assert not list((tmp_path / "a").glob(".*.part"))

    # a part left by an earlier, interrupted call is completed, not fetched again
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ".model.bin.part").write_bytes(MODEL[:300_000])
    cut = CutsFirstStream(after=len(MODEL))
    client = Client(s3_server.url, token=s3_server.token, transport=cut)
    assert (client.download(job.id, tmp_path / "b") / "model.bin").read_bytes() == MODEL
    assert cut.ranges == ["bytes=300000-"]

    # a part holding other bytes fails the digest and is fetched again from the first byte
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / ".model.bin.part").write_bytes(b"x" * 300_000)
    cut = CutsFirstStream(after=len(MODEL))
    client = Client(s3_server.url, token=s3_server.token, transport=cut)
    assert (client.download(job.id, tmp_path / "c") / "model.bin").read_bytes() == MODEL
    assert cut.ranges == ["bytes=300000-", None]

    # a large file comes as PARTS ranges at once, checked over the whole file; a range cut off
    # falls back to the one stream, which resumes
    from trainyard.sdk import http as sdk_http

    monkeypatch.setattr(sdk_http, "PARALLEL_OVER", 1)
    step = -(-len(MODEL) // sdk_http.PARTS)
    cut = CutsFirstStream(after=len(MODEL))  # cuts nothing: every range is shorter
    client = Client(s3_server.url, token=s3_server.token, transport=cut)
    assert (client.download(job.id, tmp_path / "d") / "model.bin").read_bytes() == MODEL
    assert sorted(cut.ranges) == sorted(f"bytes={a}-{min(a + step, len(MODEL)) - 1}" for a in range(0, len(MODEL), step))
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["model.bin"]
    cut = CutsFirstStream(after=10_000)
    client = Client(s3_server.url, token=s3_server.token, transport=cut)
    assert (client.download(job.id, tmp_path / "e") / "model.bin").read_bytes() == MODEL
    assert len(cut.ranges) == sdk_http.PARTS + 1 and cut.ranges[-1] is None
    assert [p.name for p in (tmp_path / "e").iterdir()] == ["model.bin"]
