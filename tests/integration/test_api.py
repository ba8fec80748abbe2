"""The REST API in-process, with the fake engine, on SQLite and PostgreSQL."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from tests.support.waiting import until
from trainyard import errors
from trainyard.api.app import create_app
from trainyard.api.fast_lane import FastLane
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.sdk.client import Client
from trainyard.services.platform import Platform
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=2, gpu_type="A100", gpu_ids=["0", "1"])]


@pytest.fixture
def env(db_url, tmp_path):
    engine = FakeEngine(NODES)
    settings = ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret")
    platform = Platform(settings, engine=engine)
    with TestClient(create_app(platform, "http://testserver"), headers={"Authorization": "Bearer s3cret"}) as tc:
        sdk = Client("http://testserver", token="s3cret", transport=tc._transport)
        yield tc, sdk, engine, platform


def report(tc, engine, attempt_id, **body):
    r = tc.post(f"/internal/attempts/{attempt_id}/replicas/0/report", json=body,
                headers=engine.launcher_headers(attempt_id))
    assert r.status_code == 200, r.text
    return r.json()


def test_a_job_goes_from_submit_to_succeeded_with_logs_and_metrics(env):
    tc, sdk, engine, _ = env
    job = sdk.submit({"name": "t", "command": "echo hi", "resources": {"gpu": 1}})
    attempt_id = until(lambda: next(iter(engine.launched), None))
    assert [c.gpus for c in engine.launched[attempt_id]] == [["0"]]
    report(tc, engine, attempt_id, phase="running", pid=1, log={"offset": 0, "data": "hi\n"},
           metrics={"offset": 0, "lines": ['{"step": 1, "ts": 1, "values": {"loss": 0.5}}']})
    assert job.status == "running"
    report(tc, engine, attempt_id, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    info = job.wait(timeout=5)
    assert info.status.value == "succeeded" and info.attempts[0].gpus == ["0"]
    assert job.logs() == "hi\n"
    assert [(m.name, m.value) for m in job.metrics()] == [("loss", 0.5)]
    # and the job's three requests went by the fast lane: an upgrade of FastAPI that turns it off shows here
    layer = tc.app.middleware_stack
    while not isinstance(layer, FastLane):
        layer = layer.app
    assert sorted(r.name for r in layer._lanes()) == ["report", "submit", "wait_job"]


def test_a_wait_answers_at_its_timeout_with_the_job_as_it_is_and_goes_on_past_reports_before_the_end(env):
    tc, sdk, engine, _ = env
    job = sdk.submit({"command": "x", "resources": {"gpu": 1}})
    attempt_id = until(lambda: next(iter(engine.launched), None))
    # a wait that times out answers the whole job as it is, not only its status
    r = tc.get(f"/api/v1/jobs/{job.id}/wait", params={"timeout": 0.05})
    assert r.status_code == 200 and r.json()["status"] == "starting"
    assert [a["id"] for a in r.json()["attempts"]] == [attempt_id]
    # a report that does not end the job wakes the wait, which goes on waiting for the end
    with ThreadPoolExecutor(1) as pool:
        waited = pool.submit(job.wait, timeout=10)
        report(tc, engine, attempt_id, phase="running", pid=1)
        report(tc, engine, attempt_id, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
        assert waited.result().status.value == "succeeded"
    # an unknown job is not found, whatever the timeout
    for timeout in (0, 1):
        r = tc.get("/api/v1/jobs/j-0000000000/wait", params={"timeout": timeout})
        assert r.status_code == 404 and r.json()["code"] == "job_not_found"


def test_bad_specs_are_rejected_naming_the_field_and_nothing_is_stored(env):
    tc, sdk, _, _ = env
    r = tc.post("/api/v1/jobs", json={"spec": {"command": "x", "resources": {"memory": "4Qi"}}})
    assert r.status_code == 422 and r.json()["code"] == "invalid_spec"
    assert r.json()["details"]["errors"][0]["field"] == "resources.memory"
    with pytest.raises(errors.Unschedulable) as exc:
        sdk.submit({"command": "x", "resources": {"gpu": 8}})
    assert exc.value.details["field"] == "resources.gpu"
    with pytest.raises(errors.InvalidSpec) as exc:
        sdk.submit({"command": "x", "bogus": 1})
    assert exc.value.errors[0]["field"] == "bogus"
    assert sdk.jobs().items == []


def test_errors_map_back_to_typed_exceptions_and_auth_is_required(env):
    tc, sdk, _, _ = env
    with pytest.raises(errors.JobNotFound):
        sdk.get("j-nope")
    r = tc.get("/api/v1/jobs", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"
    assert tc.get("/healthz").json()["status"] == "ok"


def test_cancel_pending_and_running(env):
    tc, sdk, engine, platform = env
    # no timed reconcile: it would end the cancelled attempt (the fake engine has its result at once) before
    # the launcher's report below, on a slow enough machine; the report of its end does it instead
    platform.loop.reconcile_every = 3600.0
    big = sdk.submit({"command": "x", "resources": {"cpu": 4}})
    waiting = sdk.submit({"command": "x", "resources": {"cpu": 1}})
    running_attempt = until(lambda: next(iter(engine.launched), None))
    until(lambda: "needs 1 core (0 free on any node)" in (waiting.refresh().reason or ""))
    assert waiting.cancel().status.value == "cancelled"
    report(tc, engine, running_attempt, phase="running", pid=1)
    assert big.cancel().status.value == "cancelling"
    assert report(tc, engine, running_attempt, phase="running", pid=1) == {"cancel": True}
    assert engine.cancelled == [running_attempt]
    report(tc, engine, running_attempt, phase="exited", pid=1,
           result={"exit_code": -15, "reason": "Cancelled", "outputs": []})
    assert big.wait(timeout=5).status.value == "cancelled"
    assert big.info.attempts[0].reason == "Cancelled"


def test_a_lost_attempt_is_retried_then_fails(env):
    _, sdk, engine, _ = env
    job = sdk.submit({"command": "x", "retry": {"max": 1, "backoff": 0}})
    first = until(lambda: next(iter(engine.launched), None))
    engine.lose(first)
    engine.join(first)  # the platform saw it lost, and launched the retry
    second = next(a for a in engine.launched if a != first)
    engine.lose(second)
    engine.join(second)
    info = job.wait(timeout=10)
    assert info.status.value == "failed"
    assert [a.reason for a in info.attempts] == ["LostContact", "LostContact"]
    assert "after 2 attempts" in info.reason


def test_listing_filters_and_pages(env):
    _, sdk, _, _ = env
    ids = [sdk.submit({"name": f"n{i}", "command": "x", "resources": {"cpu": 4}}).id for i in range(3)]
    page = sdk.jobs(limit=2)
    assert [j.id for j in page.items] == [ids[2], ids[1]]
    assert [j.id for j in sdk.jobs(limit=2, cursor=page.next_cursor).items] == [ids[0]]
    assert [j.id for j in sdk.jobs(name="n1").items] == [ids[1]]


def test_one_failed_replica_stops_the_gang_and_the_gang_is_retried_whole(env):
    tc, sdk, engine, _ = env
    job = sdk.submit({"command": "x", "replicas": 2, "distributed": "torch", "resources": {"cpu": 1, "gpu": 1},
                      "retry": {"max": 1, "backoff": 0}})
    first = until(lambda: next(iter(engine.launched), None))
    configs = engine.launched[first]
    assert [c.env["RANK"] for c in configs] == ["0", "1"]
    assert {c.env["WORLD_SIZE"] for c in configs} == {"2"} and configs[0].env["TORCHELASTIC_RUN_ID"] == first
    assert [c.gpus for c in configs] == [["0"], ["1"]]
    url, headers = f"/internal/attempts/{first}/replicas/{{}}/report", engine.launcher_headers(first)
    for i in (0, 1):
        assert tc.post(url.format(i), json={"phase": "running", "pid": 1}, headers=headers).json() == {"cancel": False}
    tc.post(url.format(1), headers=headers,
            json={"phase": "exited", "pid": 1, "result": {"exit_code": 1, "reason": "Error(exit 1)"}})
    assert engine.cancelled == [first]  # the healthy replica is told to stop at once
    assert tc.post(url.format(0), json={"phase": "running", "pid": 1}, headers=headers).json() == {"cancel": True}
    tc.post(url.format(0), headers=headers,
            json={"phase": "exited", "pid": 1, "result": {"exit_code": -15, "reason": "Cancelled"}})
    second = until(lambda: next((a for a in engine.launched if a != first), None))
    assert len(engine.launched[second]) == 2
    info = job.refresh()
    assert info.attempts[0].reason == "Error(exit 1)" and "replica 1" in info.attempts[0].message
    assert info.status.value in ("starting", "running")


def test_reports_need_the_attempts_own_credential_and_a_valid_body(env):
    tc, sdk, engine, _ = env
    job = sdk.submit({"command": "x"})
    attempt_id = until(lambda: next(iter(engine.launched), None))
    url = f"/internal/attempts/{attempt_id}/replicas/0/report"

    as_user = tc.post(url, json={"phase": "running", "pid": 1, "log": {"offset": 0, "data": "forged\n"}})
    malformed = tc.post(url, json={"phase": "running", "log": {"offset": "x", "data": "a"}, "metrics": []},
                        headers=engine.launcher_headers(attempt_id))

    # the users' token (the client's default header) is not a launcher's
    assert as_user.status_code == 401 and as_user.json()["code"] == "attempt_unauthorized"
    assert malformed.status_code == 422
    assert [e["field"] for e in malformed.json()["details"]["errors"]] == ["log.offset", "metrics"]
    assert job.logs() == "" and job.refresh().status.value == "starting"


def test_an_attempt_launched_again_gets_a_new_credential_and_the_old_one_stops_working(env):
    tc, sdk, engine, _ = env
    sdk.submit({"command": "x"})
    attempt_id = until(lambda: next(iter(engine.launched), None))
    first = engine.launcher_headers(attempt_id)

    engine.launched.pop(attempt_id)  # never launched, as after a restart between admitting and launching
    until(lambda: attempt_id in engine.launched)

    assert engine.launcher_headers(attempt_id) != first
    url = f"/internal/attempts/{attempt_id}/replicas/0/report"
    assert tc.post(url, json={"phase": "running", "pid": 1}, headers=first).status_code == 401
    assert report(tc, engine, attempt_id, phase="running", pid=1) == {"cancel": False}


BAD_REQUESTS = [  # (method, url, json body, the field the 422 names): each was a 201 or a 500 once
    ("POST", "/api/v1/jobs", {"spec": {"command": "x", "resources": {"cpu": "nan"}}}, "resources.cpu"),
    ("POST", "/api/v1/jobs", {"spec": {"command": "x", "priority": 1e23}}, "priority"),
    ("POST", "/api/v1/jobs", {"spec": {"command": "x", "priority": 10**20}}, "priority"),
    ("POST", "/api/v1/jobs", {"spec": {"command": "x"}, "snapshot": "abc"}, "snapshot"),
    ("PUT", "/api/v1/snapshots/sha256:" + "g" * 64, None, "digest"),
    # strings that reach podman's argv, pip's, the upload of outputs and a node selector
    ("POST", "/api/v1/jobs", {"spec": {"command": "x", "image": "--privileged"}}, "image"),
    ("POST", "/api/v1/jobs", {"spec": {"command": "x", "env": {"pip": ["numpy", "-r/etc/shadow"]}}}, "env.pip[1]"),
    ("POST", "/api/v1/jobs", {"spec": {"command": "x", "outputs": ["/etc/*"]}}, "outputs[0]"),
    ("POST", "/api/v1/jobs", {"spec": {"command": "x", "resources": {"gpu_type": "A" * 64}}}, "resources.gpu_type"),
    ("POST", "/api/v1/jobs", {"spec": {"command": "x", "env_vars": {"A": None}}}, "env_vars.A"),
    # a NUL no argv or environment can carry: the job failed later as LostContact
    ("POST", "/api/v1/jobs", {"spec": {"command": ["echo", "a\x00b"]}}, "command[1]"),
    ("POST", "/api/v1/jobs", {"spec": {"command": "x", "params": {"p": {"q": ["\x00"]}}}}, "params.p.q[0]"),
    ("POST", "/api/v1/pipelines", {"spec": {"steps": {"a": {"command": "echo \x00"}}}}, "steps.a.command"),
    ("POST", "/api/v1/queues", {"queue": {"name": "q", "priority": -4 * 10**19}}, "queue.priority"),
    ("POST", "/api/v1/queues", {"queue": {"name": "q", "quota": {"memory": [1]}}}, "queue.quota.memory"),
    ("POST", "/api/v1/pipelines", {"spec": {"steps": {"a": {"command": "x"}}, "int": 1}}, "int"),
    ("POST", "/api/v1/pipelines", {"spec": {"steps": {"a": {"command": "x"}}}, "workdirs": {".": "abc"}},
     "workdirs.."),
    ("GET", "/api/v1/jobs?cursor=null", None, "cursor"),
    ("GET", "/api/v1/pipelines?cursor=null", None, "cursor"),
    ("GET", "/api/v1/jobs/{job}/logs?after=-38000000000000000000000000000000", None, "after"),
    ("GET", "/api/v1/jobs/{job}/logs?after=38000000000000000000000000000000&follow=true", None, "after"),
    ("GET", "/api/v1/jobs/{job}/logs?attempt=99999999999", None, "attempt"),
    ("GET", "/api/v1/jobs/{job}/logs?replica=-1", None, "replica"),
    # the lean routes (trainyard.api.lean) check by hand what FastAPI checked for them
    ("POST", "/internal/attempts/a-1/replicas/abc/report", {"phase": "running"}, "replica"),
    ("POST", "/internal/attempts/a-1/replicas/-1/report", {"phase": "running"}, "replica"),
    ("POST", "/internal/attempts/a-1/replicas/2147483648/report", {"phase": "running"}, "replica"),
    ("POST", "/internal/attempts/a-1/replicas/0/report", {"phase": "started"}, "phase"),
    ("POST", "/internal/attempts/a-1/replicas/0/report", {"result": {"exit_code": 2**70}}, "result.exit_code"),
    ("POST", "/internal/attempts/a-1/replicas/0/report", [1], ""),
    ("POST", "/api/v1/jobs?dry_run=maybe", {"spec": {"command": "x"}}, "dry_run"),
    ("GET", "/api/v1/jobs/{job}/wait?timeout=301", None, "timeout"),
    ("GET", "/api/v1/jobs/{job}/wait?timeout=nan", None, "timeout"),
    ("GET", "/api/v1/jobs/{job}/wait?timeout=-1", None, "timeout"),
]


def test_bad_input_is_a_422_naming_the_field_and_one_bad_job_cannot_break_listing(env):
    tc, sdk, _, _ = env
    job = sdk.submit({"command": "x", "resources": {"cpu": 2}})
    for method, url, body, field in BAD_REQUESTS:
        # TestClient re-raises a server error, so a 500 fails here with its traceback
        r = tc.request(method, url.format(job=job.id), json=body)
        assert r.status_code == 422, (url, body, r.text)
        assert [e["field"] for e in r.json()["details"]["errors"]][:1] == [field], (url, body, r.text)
    assert [j.id for j in sdk.jobs().items] == [job.id]
    assert sdk.get(job.id).spec.resources.cpu == 2
    # a HEAD's answer has no body to name the field in: its status says it, as the PUT's does
    assert tc.head("/api/v1/snapshots/sha256:" + "g" * 64).status_code == 422
    assert tc.head("/api/v1/snapshots/sha256:" + "0" * 64).status_code == 404


def test_reads_answered_from_memory_match_the_database_and_follow_a_job_to_its_end(env):
    # given a job read and listed while it runs, and another that has ended
    tc, sdk, engine, platform = env
    done = sdk.submit({"name": "done", "command": "true"})
    first = until(lambda: next(iter(engine.launched), None))
    report(tc, engine, first, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    done.wait(timeout=5)
    job = sdk.submit({"name": "live", "command": "sleep 1"})
    attempt_id = until(lambda: next((a for a in engine.launched if a != first), None))
    report(tc, engine, attempt_id, phase="running", pid=1)
    assert tc.get(f"/api/v1/jobs/{job.id}").json()["status"] == "running"
    assert [j["status"] for j in tc.get("/api/v1/jobs").json()["items"]] == ["running", "succeeded"]
    # when it ends
    report(tc, engine, attempt_id, phase="exited", pid=1, result={"exit_code": 2, "reason": "Error(exit 2)",
                                                                     "outputs": []})
    # then reading and listing show its end, twice over (the second from memory), the same as the database says
    for _ in range(2):
        one = tc.get(f"/api/v1/jobs/{job.id}").json()
        page = tc.get("/api/v1/jobs", params={"limit": 1}).json()
        assert one["status"] == "failed" and one["attempts"][0]["exit_code"] == 2
        assert page["items"] == [one] and page["next_cursor"] is not None
        assert one == platform.store.get_job(job.id).model_dump(mode="json")
