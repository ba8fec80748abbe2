"""A query or path parameter the server's own rules refuse (a usage report's by and since, an output's path, a
secret's name, a snapshot's digest) is said as that parameter, "invalid query parameter since: why", not as a spec;
the wire code stays invalid_spec, as clients catch it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.support.inprocess import in_process
from trainyard.spec.records import NodeInfo

NODES = [NodeInfo(name="a", cpu=8, memory=32 * 2**30)]
DIGEST = "sha256:" + "0" * 64

# (method, url, the parameter's place, its name, the start of why); {job} is a job of the server's
PARAMETERS = [
    ("get", "/api/v1/usage?by=planet", "query", "by", "'planet': use one of team, user"),
    ("get", "/api/v1/usage?since=yesterday", "query", "since", "'yesterday' is not a duration; use seconds"),
    ("get", "/api/v1/usage?since=0s", "query", "since", "'0s': duration must be positive"),
    ("get", "/api/v1/jobs/{job}/outputs/model//weights.pt", "path", "path", "must not have empty, '.' or '..'"),
    ("put", "/api/v1/secrets/no%20spaces", "path", "name", "use letters, digits"),
    ("get", "/api/v1/secrets/no%20spaces", "path", "name", "use letters, digits"),
    ("put", "/api/v1/snapshots/md5:abc", "path", "digest", "expected sha256: and 64 lower-case hex digits"),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """One server for the module: each request here is refused, so none changes what another test sees."""
    tmp = tmp_path_factory.mktemp("parameters")
    with in_process(f"sqlite:///{tmp / 'trainyard.db'}", tmp / "home", NODES) as e:
        yield e


@pytest.mark.parametrize(("method", "url", "place", "name", "why"), PARAMETERS,
                         ids=[f"{m} {u.split('?')[0]} {n}" for m, u, _, n, _ in PARAMETERS])
def test_a_parameter_the_server_refuses_is_said_as_that_parameter_not_as_a_spec(env, method, url, place, name,
                                                                                 why):
    # given a job of the server's (for the routes under one)
    url = url.format(job=env.sdk.submit({"command": "x"}).id) if "{job}" in url else url
    # when the parameter is refused, then it is named as the request's, with the code clients catch
    r = env.tc.request(method, url, json={"value": "v"} if "secrets" in url else None)
    assert r.status_code == 422 and r.json()["code"] == "invalid_spec", r.text
    assert r.json()["message"].startswith(f"invalid {place} parameter {name}: {why}"), r.text
    assert "invalid spec" not in r.json()["message"], r.text
    assert [(e["in"], e["field"]) for e in r.json()["details"]["errors"]] == [(place, name)], r.text


def test_a_snapshot_whose_bytes_are_not_its_digests_is_said_as_the_request_bodys(env):
    r = env.tc.put(f"/api/v1/snapshots/{DIGEST}", content=b"not the code of that digest")
    assert r.status_code == 422 and r.json()["code"] == "invalid_spec", r.text
    assert r.json()["message"] == "invalid request body: snapshot content does not match its digest", r.text


def test_the_cli_says_a_parameter_the_server_refused_as_the_requests(env, monkeypatch):
    from trainyard.cli.main import app

    for module in ("usage", "secrets"):
        monkeypatch.setattr(f"trainyard.cli.{module}.client", lambda: env.sdk)
    for args, said in [(["usage", "--since", "yesterday"], "error: invalid query parameter since: 'yesterday' is not"),
                       (["secret", "set", "no spaces"], "error: invalid path parameter name: use letters, digits")]:
        out = CliRunner().invoke(app, args, input="value\n")
        assert out.exit_code == 2 and out.stderr.startswith(said), (args, out.stderr)
        assert "invalid spec" not in out.stderr, out.stderr
