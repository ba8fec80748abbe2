"""A job as plain text: its spec as YAML (read back to the same spec) and its whole log as a download,
streamed from the store in pages and never cut."""

import pytest
import yaml
from fastapi.testclient import TestClient

from tests.support.waiting import until
from trainyard.api.app import create_app
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.sdk.client import Client
from trainyard.services import jobs as job_service
from trainyard.services.platform import Platform
from trainyard.spec.job import JobSpec
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=2, gpu_type="A100", gpu_ids=["0", "1"])]


@pytest.fixture
def env(db_url, tmp_path):
    engine = FakeEngine(NODES)
    platform = Platform(ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret"), engine=engine)
    with TestClient(create_app(platform, "http://testserver"), headers={"Authorization": "Bearer s3cret"}) as tc:
        yield tc, Client("http://testserver", token="s3cret", transport=tc._transport), engine


def report(tc, engine, attempt_id, replica=0, **body):
    r = tc.post(f"/internal/attempts/{attempt_id}/replicas/{replica}/report", json=body,
                headers=engine.launcher_headers(attempt_id))
    assert r.status_code == 200, r.text


def test_the_spec_comes_back_as_yaml_that_reads_back_to_the_same_spec(env):
    tc, sdk, _ = env
    job = sdk.submit({"name": "t", "command": "python train.py", "params": {"lr": 0.1, "layers": [1, 2]},
                      "resources": {"memory": "2Gi"}})
    r = tc.get(f"/api/v1/jobs/{job.id}/spec.yaml")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/yaml")
    assert "memory: 2Gi" in r.text
    assert JobSpec.model_validate(yaml.safe_load(r.text)) == job.info.spec
    assert tc.get("/api/v1/jobs/j-nope/spec.yaml").json()["code"] == "job_not_found"


def test_the_whole_log_downloads_across_many_pages_and_filters_by_replica(env, monkeypatch):
    monkeypatch.setattr(job_service, "LOG_PAGE", 7)  # many pages from a small log
    tc, sdk, engine = env
    job = sdk.submit({"name": "t", "command": "x", "replicas": 2, "distributed": "torch"})
    attempt_id = until(lambda: next(iter(engine.launched), None))
    offsets = [0, 0]
    for i in range(40):
        rep = i % 2
        data = f"line {i} of replica {rep}\n"
        report(tc, engine, attempt_id, rep, phase="running", pid=1, log={"offset": offsets[rep], "data": data})
        offsets[rep] += len(data)
    r = tc.get(f"/api/v1/jobs/{job.id}/logs.txt")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert r.headers["content-disposition"] == f'attachment; filename="{job.id}.log"'
    assert r.text.splitlines() == [f"line {i} of replica {i % 2}" for i in range(40)]
    r = tc.get(f"/api/v1/jobs/{job.id}/logs.txt", params={"attempt": 1, "replica": 1})
    assert r.text.splitlines() == [f"line {i} of replica 1" for i in range(1, 40, 2)]
    assert f'filename="{job.id}-attempt1-replica1.log"' in r.headers["content-disposition"]
    assert tc.get(f"/api/v1/jobs/{job.id}/logs.txt", params={"replica": -1}).status_code == 422
    assert tc.get("/api/v1/jobs/j-nope/logs.txt").status_code == 404


def test_a_follow_stream_gives_each_chunk_its_own_cursor_so_a_resume_mid_page_loses_nothing(env):
    # given a job whose log is several chunks, all in one page of the store
    tc, sdk, engine = env
    job = sdk.submit({"name": "t", "command": "x"})
    attempt_id = until(lambda: next(iter(engine.launched), None))
    offset = 0
    for i in range(5):
        data = f"chunk {i}\n"
        report(tc, engine, attempt_id, phase="running", pid=1, log={"offset": offset, "data": data})
        offset += len(data)
    report(tc, engine, attempt_id, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    # when it is followed from the start
    with tc.stream("GET", f"/api/v1/jobs/{job.id}/logs", params={"follow": "true"}) as r:
        frames = [f for f in "".join(r.iter_text()).split("\n\n") if f.startswith("id:")]
    ids = [int(f.split("\n")[0].removeprefix("id: ")) for f in frames]
    # then every chunk has its own, increasing cursor
    assert len(ids) == 5 and ids == sorted(set(ids))
    # and a client that got only two before the stream broke resumes with the other three
    with tc.stream("GET", f"/api/v1/jobs/{job.id}/logs", params={"follow": "true", "after": ids[1]}) as r:
        rest = "".join(r.iter_text())
    assert [f"chunk {i}" in rest for i in range(5)] == [False, False, True, True, True]
