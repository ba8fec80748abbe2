"""Retention with a real server and real processes: an ended attempt's work dir and an ended job's checkpoints
go once they are old enough, the attempt's log and metrics stay; a running job's stay; what the user reads
(log, outputs) is still there."""

import time

import httpx
import pytest

from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess
from trainyard.engines.leftovers import KEPT

pytestmark = pytest.mark.slow

WRITES = """
import os, trainyard
open(os.path.join(trainyard.checkpoint_dir(), "step.pt"), "w").write("weights")
open(os.path.join(trainyard.output_dir(), "model.txt"), "w").write("model")
open("scratch.bin", "wb").write(b"x" * 100_000)
print("trained", flush=True)
"""


@pytest.fixture
def srv(tmp_path):
    config = tmp_path / "server.yaml"
    config.write_text("retention: {work_dirs: 2s, checkpoints: 2s, every: 0.5s}\n")
    s = ServerProcess(tmp_path / "home", ["--cpus", "2", "--memory", "4Gi", "--config", str(config)])
    s.start()
    yield s
    s.stop_all()


def test_ended_work_is_swept_running_work_is_not_and_logs_and_outputs_stay(srv, tmp_path):
    sdk = srv.client()
    running = sdk.submit(py_job("import time; print('up', flush=True); time.sleep(30)", name="running"))
    until(lambda: "up" in running.logs(), timeout=30)
    done = sdk.submit(py_job(WRITES, name="done"))
    assert done.wait(timeout=60).status.value == "succeeded"
    attempt = sdk.get(done.id).attempts[0].id
    folder, checkpoints = srv.home / "attempts" / attempt, srv.home / "checkpoints" / done.id
    assert (folder / "r0" / "work" / "scratch.bin").exists() and (checkpoints / "step.pt").exists()
    ended = time.monotonic()

    until(lambda: not (folder / "r0" / "work").exists() and not checkpoints.exists(), timeout=30)
    left = {p.name for p in (folder / "r0").iterdir()}
    assert {"output.log", "result.json"} <= left <= KEPT, left  # its records
    assert "trained" in (folder / "r0" / "output.log").read_text()
    assert time.monotonic() - ended >= 1.5  # not before its keep
    running_attempt = sdk.get(running.id).attempts[0].id
    assert (srv.home / "attempts" / running_attempt / "r0" / "work").is_dir()  # still running: kept
    assert (srv.home / "checkpoints" / running.id).is_dir()
    # what the user reads of the job is the server's, not the folder's
    assert "trained" in done.logs()
    out = tmp_path / "out"
    sdk.download(done.id, out)
    assert (out / "model.txt").read_text() == "model"
    metrics = httpx.get(srv.url + "/metrics", headers=srv.headers).text
    assert 'trainyard_retention_removed_total{kind="attempt"} 1.0' in metrics, metrics
    assert 'trainyard_retention_removed_total{kind="checkpoints"} 1.0' in metrics
    sdk.cancel(running.id)

