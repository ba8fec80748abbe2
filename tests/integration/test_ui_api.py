"""What the web UI's pages read and send beyond the CLI's API: specs as YAML text with errors at their
lines (and dry runs), each queue's use and its team's fair-share standing, which job holds each GPU.
In-process with the fake engine, on SQLite and PostgreSQL."""

import threading

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from tests.support.waiting import until
from trainyard.api.app import create_app
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.services.platform import Platform
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30, gpu=4, gpu_type="A100", gpu_ids=["0", "1", "2", "3"])]
YAML = {"Content-Type": "application/yaml"}

BAD_JOB = """\
name: train
command: python train.py
resources:
  gpus: 2
"""

PIPELINE = """\
name: tiny
steps:
  prepare:
    command: echo prepare
  train:
    needs: [prepare]
    command: echo train
    resources: {cpu: 1}
"""


@pytest.fixture
def env(db_url, tmp_path):
    engine = FakeEngine(NODES)
    platform = Platform(ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret"), engine=engine)
    with TestClient(create_app(platform, "http://testserver"), headers={"Authorization": "Bearer s3cret"}) as tc:
        yield tc, engine, platform


def errors_of(r):
    assert r.status_code == 422, r.text
    return r.json()["details"]["errors"]


def test_a_yaml_job_with_a_bad_field_is_refused_at_its_line_and_a_good_one_runs(env):
    tc, _, _ = env
    # when a spec with a misspelt field on line 4 is sent as YAML
    [err] = errors_of(tc.post("/api/v1/jobs", content=BAD_JOB, headers=YAML))
    # then the error names the field, the line, and the field meant
    assert err["line"] == 4 and err["field"] == "resources.gpus"
    assert "unknown field 'gpus'" in err["message"] and "'gpu'" in err["message"]
    assert tc.get("/api/v1/jobs").json()["items"] == []
    # and the same spec corrected is submitted as the user wrote it
    r = tc.post("/api/v1/jobs", content=BAD_JOB.replace("gpus", "gpu"), headers={"Content-Type": "text/yaml"})
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["resources"]["gpu"] == 2 and r.json()["name"] == "train"


def test_a_dry_run_checks_everything_and_stores_nothing(env):
    tc, _, _ = env
    r = tc.post("/api/v1/jobs", params={"dry_run": True}, content="name: ok\ncommand: echo hi\n", headers=YAML)
    assert r.status_code == 200 and r.json() == {"kind": "job", "name": "ok", "steps": None, "warnings": []}
    # errors found past the parse (room on the nodes, the queue) name their line too
    too_big = "name: big\ncommand: echo hi\nresources:\n  cpu: 1\n  gpu: 64\n"
    r = tc.post("/api/v1/jobs", params={"dry_run": True}, content=too_big, headers=YAML)
    assert r.status_code == 422 and r.json()["code"] == "unschedulable"
    assert r.json()["details"] == {"field": "resources.gpu", "line": 5}
    assert tc.post("/api/v1/queues", json={"queue": {"name": "main"}}).status_code == 201
    [err] = errors_of(tc.post("/api/v1/jobs", params={"dry_run": "true"}, headers=YAML,
                              content="name: q\ncommand: echo\nqueue: nowhere\n"))
    assert err["field"] == "queue" and err["line"] == 3 and "nowhere" in err["message"]
    # JSON bodies keep working, with their own dry run
    r = tc.post("/api/v1/jobs?dry_run=1", json={"spec": {"name": "j", "command": "echo"}})
    assert r.status_code == 200 and r.json()["kind"] == "job"
    assert errors_of(tc.post("/api/v1/jobs", json={"spec": {"command": "x", "resources": {"memory": "4Qi"}}})
                     )[0]["field"] == "resources.memory"
    assert tc.get("/api/v1/jobs").json()["items"] == []


def test_a_dry_run_refuses_what_the_submit_refuses_in_after(env):
    tc, _, _ = env
    # given a spec that waits for a job that is not there (or not the caller's to see)
    spec = "name: eval\ncommand: echo\nafter: [j-0000000000]\n"
    # then the dry run refuses it as the submit does, naming the field and line, instead of saying all is well
    checked, submitted = (errors_of(tc.post("/api/v1/jobs", params=p, content=spec, headers=YAML))
                          for p in ({"dry_run": True}, {}))
    assert checked == submitted and checked[0]["field"] == "after.0.job" and checked[0]["line"] == 3, checked


@pytest.mark.parametrize("body, says", [
    (b"\xff\xfe not text", "not UTF-8"),
    (b"name: [unclosed\n", "not valid YAML"),
    (b"- a list\n- not a spec\n", "mapping"),
    (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
    (b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
        b"%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n" % ((c, c) + (c - 1,) * 10)
        for c in range(ord("b"), ord("k"))), "more than 100000 values"),
    (b"name: x\ncommand: y\nparams: {lr: .nan}\n", "finite"),
    (b"x" * (2 << 20), "larger than 1 MiB"),
])
def test_hostile_yaml_is_refused_with_a_reason_never_a_crash(env, body, says):
    tc, _, _ = env
    for path in ("/api/v1/jobs", "/api/v1/pipelines"):
        r = tc.post(path, content=body, headers=YAML)
        assert r.status_code == 422, (path, r.text[:300])
        assert says in r.text, (path, r.text[:300])


def test_a_yaml_pipeline_is_checked_at_its_lines_dry_run_and_run(env):
    tc, _, _ = env
    bad = PIPELINE.replace("needs: [prepare]", "needs: [prepair]").replace("cpu: 1", "cpu: 1, colour: red")
    errs = errors_of(tc.post("/api/v1/pipelines", content=bad, headers=YAML))
    assert any(e["line"] == 8 and "colour" in e["field"] for e in errs), errs
    r = tc.post("/api/v1/pipelines?dry_run=true", content=PIPELINE, headers=YAML)
    assert r.status_code == 200 and r.json()["kind"] == "pipeline" and r.json()["steps"] == 2
    assert tc.get("/api/v1/pipelines").json()["items"] == []
    r = tc.post("/api/v1/pipelines", content=PIPELINE, headers=YAML)
    assert r.status_code == 201, r.text
    assert [s["name"] for s in r.json()["steps"]] == ["prepare", "train"] and r.json()["source"] == "spec.yaml"
    # the runs list finds it by a part of its name, in any case, and % is no wildcard
    assert tc.post("/api/v1/pipelines", content=PIPELINE.replace("name: tiny", "name: big-50"),
                   headers=YAML).status_code == 201
    names = lambda q: [run["name"] for run in tc.get("/api/v1/pipelines", params={"name": q}).json()["items"]]  # noqa: E731
    assert names("TIN") == ["tiny"] and names("G-5") == ["big-50"] and names("t%y") == [] and names("i_y") == []
    assert names("") == ["big-50", "tiny"]


def hold(tc, engine, name, queue, gpu):
    job = tc.post("/api/v1/jobs", json={"spec": {"name": name, "command": "sleep 60", "queue": queue,
                                                 "resources": {"cpu": 1, "gpu": gpu}}}).json()
    until(lambda: any(c[0].job_id == job["id"] for c in engine.launched.values()))
    return job["id"]


def test_queues_show_use_per_gpu_type_and_each_teams_fair_share_standing(env):
    tc, engine, _ = env
    for name, team, gpus in (("vision", "cv", 2), ("speech", "asr", 2), ("idle", "nlp", 1)):
        r = tc.post("/api/v1/queues", json={"queue": {"name": name, "team": team, "quota": {"gpu": {"A100": gpus}}}})
        assert r.status_code == 201, r.text
    held = hold(tc, engine, "big", "vision", 2)
    hold(tc, engine, "small", "speech", 1)
    queues = {q["queue"]["name"]: q for q in tc.get("/api/v1/queues").json()}
    vision = queues["vision"]
    assert vision["usage"]["gpu"] == {"A100": 2} and vision["usage"]["running"] == 1 and vision["pending"] == 0
    # cv holds 2 of 4 A100s: its dominant share is a half, the most of any team, so it ranks last
    assert vision["fair_share"] == {"team": "cv", "share": 0.5, "dominant": "gpu:A100", "rank": 3, "teams": 3}
    assert queues["speech"]["fair_share"]["share"] == 0.25 and queues["speech"]["fair_share"]["rank"] == 2
    assert queues["idle"]["fair_share"] == {"team": "nlp", "share": 0.0, "dominant": None, "rank": 1, "teams": 3}
    # and the nodes say which job holds which GPU
    [node] = tc.get("/api/v1/nodes").json()
    assert sorted(node["gpus_used"]) == sorted(node["gpu_holders"]) and len(node["gpu_holders"]) == 3
    assert sorted(j for j in node["gpu_holders"].values() if j == held) == [held, held]


def test_the_queue_list_takes_a_fixed_number_of_queries_whatever_the_queues_and_jobs(env):
    tc, engine, platform = env
    counted: list[str] = []
    me = threading.get_ident()

    def count(conn, cursor, statement, *args):  # noqa: ANN001
        if threading.get_ident() == me and not statement.startswith("BEGIN"):  # not the scheduler's own
            counted.append(statement)

    event.listen(platform.store.engine, "before_cursor_execute", count)
    try:
        per_size = []
        for first, last in ((0, 1), (1, 6)):  # one queue and job, then six of each
            for i in range(first, last):
                tc.post("/api/v1/queues", json={"queue": {"name": f"q{i}", "team": f"t{i}"}})
                hold(tc, engine, f"j{i}", f"q{i}", 0)
            counted.clear()
            shown = platform.queues.list()
            per_size.append(len(counted))
            assert sum(q.usage.running for q in shown) == last
    finally:
        event.remove(platform.store.engine, "before_cursor_execute", count)
    # the queues, the job counts, the live attempts (with their replicas), and the live jobs not seen yet
    assert max(per_size) <= 5, per_size
