"""Hostile input that reached the database or a serializer as it was: each is now a 422 naming the field (a 500
and a traceback before), on SQLite and on PostgreSQL (which refuses a NUL in any text)."""

from __future__ import annotations

import pytest

from tests.support.inprocess import in_process
from trainyard.spec.params import MAX_DEPTH
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]
DEEP = "[" * 300 + "1" + "]" * 300  # past pydantic's 255 of model_dump, within FastAPI's json.loads


@pytest.fixture
def e(db_url, tmp_path):
    with in_process(db_url, tmp_path / "home", NODES) as e:
        yield e


def fields(r) -> list[str]:
    assert r.status_code == 422, (r.status_code, r.text)
    return [x["field"] for x in r.json()["details"]["errors"]]


@pytest.mark.parametrize("method, url", [
    ("GET", "/api/v1/jobs/%00"), ("GET", "/api/v1/jobs/j%00/logs"), ("POST", "/api/v1/jobs/%00/cancel"),
    ("GET", "/api/v1/schedules/%00"), ("DELETE", "/api/v1/schedules/%00"), ("GET", "/api/v1/pipelines/%00"),
    ("GET", "/api/v1/artifacts/%00"), ("POST", "/api/v1/tokens/%00/revoke"), ("GET", "/api/v1/services/%00")])
def test_a_nul_in_a_path_is_refused_naming_it(e, method, url):
    assert fields(e.tc.request(method, url)) == ["path"]


def test_a_nul_in_a_query_is_refused_naming_the_parameter_even_without_a_valid_credential(e):
    assert fields(e.tc.get("/api/v1/pipelines", params={"name": "\x00"})) == ["name"]
    assert fields(e.tc.get("/api/v1/pipelines?limit=5&status=%00")) == ["status"]
    made_up = {"Authorization": "Bearer made-up"}
    assert fields(e.tc.post("/internal/attempts/a%00/secrets", headers=made_up)) == ["path"]
    assert fields(e.tc.post("/internal/attempts/a%00/replicas/0/report", json={}, headers=made_up)) == ["path"]


def test_a_nul_in_a_stored_text_is_refused(e):
    spec = {"name": "p", "steps": {"a": {"command": "true"}}}
    assert fields(e.tc.post("/api/v1/pipelines", json={"spec": spec, "source": "a\x00b"})) == ["source"]
    sched = {"spec": {"name": "s", "cron": "@daily", "job": {"command": "true"}}, "source": "a\x00b"}
    assert fields(e.tc.post("/api/v1/schedules", json=sched)) == ["source"]
    # a NUL no check names (a workdir's name) is still the caller's mistake, not the server's, on PostgreSQL
    digest = "sha256:" + "0" * 64
    r = e.tc.post("/api/v1/schedules", json={**sched, "source": None, "workdirs": {"a\x00": digest}})
    assert r.status_code < 500, r.text


def test_pipeline_runs_are_listed_by_known_statuses_and_a_source_is_bounded(e):
    assert fields(e.tc.get("/api/v1/pipelines", params={"status": "runing"})) == ["status[0]"]
    assert e.tc.get("/api/v1/pipelines", params={"status": ["running", "failed"]}).status_code == 200
    spec = {"name": "p", "steps": {"a": {"command": "true"}}}
    assert fields(e.tc.post("/api/v1/pipelines", json={"spec": spec, "source": "x" * 1001})) == ["source"]


@pytest.mark.parametrize("url, spec", [
    ("/api/v1/schedules", {"name": "s", "cron": "@daily", "suspend": True, "job": {"command": "true", "params": "P"}}),
    ("/api/v1/sweeps", {"name": "w", "job": {"command": "true", "params": "P"}, "metric": {"name": "m"},
                        "parameters": {"k": {"values": [1]}}}),
    ("/api/v1/services", {"name": "v", "command": "true", "params": "P", "service": {"replicas": 0}}),
    ("/api/v1/jobs?dry_run=true", {"name": "j", "command": "true", "params": "P"})])
def test_params_nested_past_the_bound_are_refused_naming_them(e, url, spec):
    import json

    body = json.dumps({"spec": spec}).replace('"P"', '{"a": %s}' % DEEP)
    r = e.tc.post(url, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    # "params: a[0]…: nested more than 64 deep", or (/jobs, read by jiter) "recursion limit exceeded"
    assert "nested more than 64 deep" in r.text or "recursion limit" in r.text, r.text
    ok = json.dumps({"spec": spec}).replace('"P"', '{"a": %s}' % ("[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)))
    assert e.tc.post(url, content=ok, headers={"Content-Type": "application/json"}).status_code in (200, 201)


def test_a_schedules_pipeline_with_a_nan_is_refused_not_stored_as_null(e):
    pipeline = {"name": "p", "steps": {"a": {"command": "true", "inputs": {"x": {"value": float("nan")}}}}}
    r = e.tc.post("/api/v1/schedules", content=_json({"spec": {"name": "s", "cron": "@daily", "pipeline": pipeline}}),
                  headers={"Content-Type": "application/json"})
    assert fields(r) == ["pipeline"] and "steps.a.inputs.x.value: nan is not a number JSON can hold" in r.text
    assert e.tc.get("/api/v1/schedules").json()["items"] == []


def _json(value) -> str:
    import json

    return json.dumps(value)  # NaN written as JSON's non-standard NaN, as a hostile client would
