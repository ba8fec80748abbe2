"""A request body that is not a spec (a token's, a queue's, a label change, a schedule's or service's fields
beside its spec, JSON that is not an object) is refused as "invalid request body: FIELD: why" through the API and
the CLI, not as a spec; the wire code stays invalid_spec, and a job's or service's spec still says "invalid spec"."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.support.inprocess import in_process
from trainyard.spec.records import NodeInfo

NODES = [NodeInfo(name="a", cpu=8, memory=32 * 2**30)]
FAR = "0 0 1 1 *"  # 1 January: the server's own loop never fires during a test
DIGEST = "sha256:" + "0" * 64
SCHEDULE = {"name": "nightly", "cron": FAR, "job": {"command": "x"}}
SERVICE = {"name": "web", "command": "app"}

# (method, path, body, the field named, the start of why); {job} is a job of the server's
BODIES = [
    ("post", "/api/v1/tokens", {"name": "ci", "expires_in": "soon"}, "expires_in", "Input should be a valid integer"),
    ("post", "/api/v1/tokens", {"nme": "ci"}, "nme", "unknown field 'nme'"),
    ("post", "/api/v1/queues", {"queue": {"name": "q", "quota": {"memory": "lots"}}}, "queue.quota.memory",
     "'lots' is not a memory quantity"),
    ("post", "/api/v1/queues", {"queue": {"name": "q"}, "replace": "maybe"}, "replace", "Input should be a valid"),
    ("patch", "/api/v1/jobs/{job}/labels", {"labels": {"trainyard.io/sweep": "s"}}, "labels",
     "trainyard.io/sweep: labels under trainyard.io/ are trainyard's own"),
    ("post", "/api/v1/schedules", {"spec": SCHEDULE, "snapshot": "latest"}, "snapshot", "String should match"),
    ("post", "/api/v1/services", {"spec": SERVICE, "snapshot": 5}, "snapshot", "Input should be a valid string"),
    ("post", "/api/v1/jobs", {"spec": {"command": "x"}, "snapshot": "latest"}, "snapshot", "String should match"),
    ("post", "/api/v1/pipelines", {"spec": {}, "workdirs": {"a": "latest"}}, "workdirs.a", "String should match"),
    ("post", "/api/v1/users", {"name": "bob"}, "team", "a member belongs to a team: give --team"),
    ("post", "/api/v1/users", {"name": "local", "role": "admin"}, "name", "'local' is the server's own identity"),
    ("post", "/api/v1/teams", {"name": "no spaces"}, "name", "use letters, digits"),
    ("put", "/api/v1/secrets/hf", {"value": 1}, "value", "Input should be a valid string"),
    ("post", "/api/v1/subscriptions", {"webhook": "nosuch"}, "webhook", "no webhook 'nosuch' you may use"),
    ("post", "/api/v1/nodes/a/cordon", {"reason": "one\ntwo"}, "reason", "a reason is one line"),
    ("post", "/api/v1/jobs/{job}/exec", {"argv": []}, "argv", "List should have at least 1 item"),
    ("post", "/api/v1/clusters/c-1/scale", {"workers": -1}, "workers", "Input should be greater than"),
]
# a body that is not JSON, or not an object, is the body's own fault whatever the route takes
WHOLE = [
    ("/api/v1/jobs", "[1]", "must be a JSON object, not an array"),
    ("/api/v1/tokens", '"laptop"', "must be a JSON object, not a string"),
    ("/api/v1/services", "{", "not valid JSON: "),
    ("/api/v1/queues", "[1", "not valid JSON: "),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """One server for the module: each request here is refused, so none changes what another test sees."""
    tmp = tmp_path_factory.mktemp("bodies")
    with in_process(f"sqlite:///{tmp / 'trainyard.db'}", tmp / "home", NODES) as e:
        yield e


@pytest.mark.parametrize(("method", "path", "body", "field", "why"), BODIES,
                         ids=[f"{m} {p} {f}" for m, p, _, f, _ in BODIES])
def test_a_bad_field_of_a_body_that_is_not_a_spec_is_said_as_the_request_bodys(env, method, path, body, field,
                                                                                 why):
    # given a job of the server's (for the routes under one)
    path = path.format(job=env.sdk.submit({"command": "x"}).id) if "{job}" in path else path
    # when a body with a bad field is sent, then it is named as the body's, with the code clients catch
    r = env.tc.request(method, path, json=body)
    assert r.status_code == 422 and r.json()["code"] == "invalid_spec", r.text
    lines = r.json()["message"].splitlines()
    assert any(line.startswith(f"invalid request body: {field}: {why}") for line in lines), r.text
    assert all(line.startswith("invalid request body: ") for line in lines), r.text
    said = next(e for e in r.json()["details"]["errors"] if e["field"] == field)
    assert said["in"] == "body" and said["message"].startswith(why), said


@pytest.mark.parametrize(("path", "text", "said"), WHOLE)
def test_a_body_that_is_not_json_or_not_an_object_says_so(env, path, text, said):
    r = env.tc.post(path, content=text, headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["code"] == "invalid_spec", r.text
    assert r.json()["message"].startswith(f"invalid request body: {said}"), r.text
    assert r.json()["details"]["errors"][0]["in"] == "body"


def test_a_scale_the_service_cannot_take_is_said_in_one_line_as_the_requests(env):
    # given a service autoscaling up to 2 replicas
    env.sdk.services.apply({"name": "auto", "command": "app", "service": {"autoscale": {"min": 0, "max": 2}}})
    # when asked for at least 5, then the request is refused in one line naming what it set, with no pydantic dump
    r = env.tc.post("/api/v1/services/auto/scale", json={"min": 5})
    assert r.status_code == 422, r.text
    assert r.json()["message"] == "invalid request body: autoscale: min (5) is more than max (2)", r.text
    # and a request at odds with itself is the body's as a whole
    r = env.tc.post("/api/v1/services/auto/scale", json={"min": 3, "max": 1})
    assert r.json()["message"] == "invalid request body: min (3) is more than max (1)", r.text


def test_a_specs_own_fields_still_say_invalid_spec_beside_the_bodys(env):
    for path, body, said in [("/api/v1/jobs", {"spec": {"command": "x", "gpus": 1}}, "  gpus: unknown field"),
                             ("/api/v1/services", {"spec": {**SERVICE, "port": "web"}}, "  port: "),
                             ("/api/v1/schedules", {"spec": {**SCHEDULE, "cron": "daily"}}, "  cron: 'daily' has 1"),
                             ("/api/v1/clusters", {"workers": -1}, "  workers: ")]:  # its whole body is the spec
        r = env.tc.post(path, json=body)
        assert r.status_code == 422 and r.json()["message"].startswith(f"invalid spec:\n{said}"), (path, r.text)
        assert all("in" not in e for e in r.json()["details"]["errors"]), r.text
    # and both, where both are wrong: the body's field said as the body's, the spec's under "invalid spec"
    r = env.tc.post("/api/v1/services", json={"spec": {**SERVICE, "port": "web"}, "snapshot": 5})
    assert r.json()["message"].startswith("invalid request body: snapshot: Input should be a valid string\n"
                                          "invalid spec:\n  port: "), r.text


def test_the_cli_says_a_body_the_server_refused_as_the_request_bodys(env, monkeypatch):
    from trainyard.cli.main import app

    for module in ("admin", "nodes", "labels"):
        monkeypatch.setattr(f"trainyard.cli.{module}.client", lambda: env.sdk)
    job = env.sdk.submit({"command": "x"}).id
    for args, said in [(["admin", "user", "create", "bob"],
                        "error: invalid request body: team: a member belongs to a team: give --team\n"),
                       (["nodes", "cordon", "a", "--reason", "one\ntwo"],
                        "error: invalid request body: reason: a reason is one line"),
                       # a label is the command's own argument: said as its, not as a body the user never wrote
                       (["label", job, "trainyard.io/sweep=s"], "error: labels: trainyard.io/sweep: labels under")]:
        out = CliRunner().invoke(app, args)
        assert out.exit_code == 2 and out.stderr.startswith(said), (args, out.stderr)
        assert "invalid spec" not in out.stderr, out.stderr
