"""A job's remote inputs outside trainyard's store are fetched with the job's own credentials, never the launcher's
(the node's keys to the store), against an S3 server that checks IAM keys and policies (moto on loopback): a job
reads only what its own keys may read, and a node's cached copy is given only to a job whose keys read it too."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.accounts import nobody_python
from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, make_config, read_result, report_server,
)
from tests.support.s3 import iam_moto_s3

READ = ("import os; d = os.environ['TRAINYARD_INPUT_DATA']; print('got', open(d + '/a.txt').read(), "
        "open(d + '/sub/b.txt').read(), os.getuid())")
BUCKET = ["arn:aws:s3:::{0}", "arn:aws:s3:::{0}/*"]


@pytest.fixture(scope="module")
def world():
    """Buckets ``data`` (a dataset) and ``store`` (trainyard's), and three users' keys: ``node_store`` may do
    anything in the store only, ``node_all`` anything anywhere, ``alice`` read ``data``."""
    with iam_moto_s3() as s3:
        keys = {"node_store": s3.user("node-store", ["s3:*"], [r.format("store") for r in BUCKET]),
                "node_all": s3.user("node-all", ["s3:*"], ["*"]),
                "alice": s3.user("alice", ["s3:GetObject", "s3:ListBucket"], [r.format("data") for r in BUCKET])}
        setup = s3.client("s3")
        for bucket in ("data", "store"):
            setup.create_bucket(Bucket=bucket)
        setup.put_object(Bucket="data", Key="train/a.txt", Body=b"alpha")
        setup.put_object(Bucket="data", Key="train/sub/b.txt", Body=b"beta")
        s3.enforce()
        s3.client("s3", keys["node_store"]).put_object(Bucket="store", Key="ty/jobs/j0/1/outputs/a.txt",
                                                         Body=b"from the store")
        s3.keys = keys
        yield s3


def aws(keys: tuple[str, str]) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": keys[0], "AWS_SECRET_ACCESS_KEY": keys[1]}


def launch(world, report_server, attempt: Path, node: str, job_keys: str | None, inputs: dict[str, str],
           command: str = READ, python: str = PYTHON, **kw) -> tuple[dict, str]:  # noqa: ANN001
    make_config(attempt, report_server.url, [python, "-c", command], inputs=inputs,
                input_cache=str(attempt.parent / "cache"), storage={"s3": {"endpoint_url": world.endpoint}},
                store_url="s3://store/ty", env=aws(world.keys[job_keys]) if job_keys else {},
                inputs_as_job=job_keys is not None, **kw)  # as the server sets it: the job has secrets
    if kw.get("run_as"):
        os.chmod(attempt, 0o711)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(aws(world.keys[node]), AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                           *[p for p in sys.path if "site-packages" in p]]))
    proc = subprocess.run([python, "-m", "trainyard.launch", str(attempt)], env=env, capture_output=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return read_result(attempt), (attempt / "output.log").read_text()


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")) if cache.exists() else []


def test_an_input_outside_the_store_is_fetched_with_the_jobs_own_keys_and_its_cached_copy_is_not_given_to_others(
        world, report_server, tmp_path):
    data = {"data": "s3://data/train/"}
    # the node's keys reach the store only; the job brings its own (as its secrets would), which read the bucket
    result, log = launch(world, report_server, tmp_path / "a1", "node_store", "alice", data)
    assert result["reason"] == "Succeeded", log
    assert f"got alpha beta {os.getuid()}" in log
    [entry] = entries(tmp_path / "cache")

    # a job with no keys of its own: the node's are not lent to it, and the node's copy is not handed to it
    for node in ("node_store", "node_all"):
        result, log = launch(world, report_server, tmp_path / f"b-{node}", node, None, data)
        assert result["reason"] == "Succeeded" if node == "node_all" else result["reason"] == "SetupFailed", result
    assert "input 'data': cannot fetch s3://data/train/" in read_result(tmp_path / "b-node_store")["message"]
    assert "got" not in (tmp_path / "b-node_store" / "output.log").read_text()
    # (a job run as the server's own account has the node's keys in its environment: with keys that read the
    # bucket, it reads it, as the job itself could; an account's job gets none, below)
    assert entries(tmp_path / "cache") == [entry]

    # an input in trainyard's store was vetted by the server: fetched with the node's keys, which alice's are not
    result, log = launch(world, report_server, tmp_path / "c", "node_store", "alice",
                         {"data": "s3://store/ty/jobs/j0/1/outputs/"},
                         command="import os; print(open(os.environ['TRAINYARD_INPUT_DATA'] + '/a.txt').read())")
    assert result["reason"] == "Succeeded", log
    assert "from the store" in log


def test_an_accounts_input_is_fetched_as_that_account_without_the_nodes_keys_into_an_entry_of_its_own(
        world, report_server):
    runnable = nobody_python(PYTHON)
    root = Path(tempfile.mkdtemp(prefix="trainyard-inputs-"))
    os.chmod(root, 0o711)  # the account passes through to its folders, as under a server's home
    try:
        run_as, data = {"uid": 65534, "gid": 65534, "name": "nobody"}, {"data": "s3://data/train/"}
        # the node's keys reach every bucket; an account's job gets none of them, for its inputs either
        result, log = launch(world, report_server, root / "none", "node_all", None, data, python=runnable,
                             run_as=run_as)
        assert result["reason"] == "SetupFailed", result
        assert "input 'data': cannot fetch" in result["message"] and "got" not in log
        assert entries(root / "cache") == []

        result, log = launch(world, report_server, root / "own", "node_all", "alice", data, python=runnable,
                             run_as=run_as)
        assert result["reason"] == "Succeeded", log
        assert "got alpha beta 65534" in log
        [entry] = entries(root / "cache")
        # the account's own: its group may read it, no one else may, and no one may change it
        for path in [entry, *entry.rglob("*")]:
            st = path.lstat()
            assert st.st_uid == 0 and st.st_gid == 65534, path
            assert stat.S_IMODE(st.st_mode) & 0o227 == 0, (path, oct(st.st_mode))

        # the same input for the server's own account: an entry apart, which the account's fetch never touched
        result, log = launch(world, report_server, root / "roots", "node_all", None, data, python=runnable)
        assert result["reason"] == "Succeeded", log
        assert len(entries(root / "cache")) == 2
    finally:
        shutil.rmtree(root, ignore_errors=True)
