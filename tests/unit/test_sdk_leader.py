"""The SDK in a job follows the servers' leader ($TRAINYARD_SERVER_FILE) when its server is gone, and
sends a request again only where doing it twice is harmless: real sockets on 127.0.0.1."""

import json
import socket

import httpx
import pytest

from tests.support.stub_http import JsonServer, Request, Unanswering
from trainyard import envvars, errors
from trainyard.home import moved_leader
from trainyard.sdk import quick
from trainyard.sdk.http import Http, may_resend


def Leader(answer=lambda method: {"ok": True}) -> JsonServer:
    """A server that answers each request with 200 and ``answer(method)`` as JSON (none: drops the
    connection instead) and records what it got: (method, path, Authorization header)."""
    def record(r: Request) -> tuple[str, str, str | None]:
        return r.method, r.path, next((v for k, v in r.headers.items() if k.lower() == "authorization"), None)

    return JsonServer(lambda method, path: None if (data := answer(method)) is None else (200, data), record,
                      keep_alive=False)


def Dying() -> Unanswering:
    """A server that reads a whole request, then drops the connection without an answer (killed mid-request)."""
    return Unanswering(hold=False)


def refusing_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens once it is closed


@pytest.fixture
def leader(tmp_path, monkeypatch):
    """A live leader announced in a leader file, as servers sharing a SQLite file do, with its home's token."""
    server = Leader(lambda method: {"id": "j-1", "status": "succeeded"} if method == "GET" else {"ok": True})
    home = tmp_path / "leader-home"
    home.mkdir()
    (home / "server.json").write_text(json.dumps({"url": server.url, "pid": 1, "home": str(home)}))
    (home / "token").write_text("leader-token")
    leader_file = tmp_path / "shared.db.server.json"
    leader_file.write_text(json.dumps({"url": server.url, "pid": 1, "home": str(home)}))
    monkeypatch.setenv(envvars.SERVER_FILE, str(leader_file))
    monkeypatch.setenv(envvars.HOME, str(tmp_path / "job-home"))
    monkeypatch.delenv(envvars.TOKEN, raising=False)
    yield server
    server.close()


def in_job(url: str, token: str | None = "old-token") -> Http:
    return Http(url, token, follow=lambda dead, wait: moved_leader(dead, wait=1.0))


def test_a_post_that_reached_a_dying_server_is_not_sent_again(leader):
    dying = Dying()
    with pytest.raises(errors.ServerUnavailable):
        in_job(dying.url).request("POST", "/api/v1/jobs", json={"name": "once"})
    assert dying.requests == 1 and leader.got == []  # it may have been done there: never twice


def test_a_get_that_reached_a_dying_server_goes_to_the_new_leader_with_its_token(leader):
    http = in_job(Dying().url)
    assert http.request("GET", "/api/v1/jobs/j-1").json()["status"] == "succeeded"
    assert leader.got == [("GET", "/api/v1/jobs/j-1", "Bearer leader-token")]
    assert http.server == leader.url


def test_a_post_whose_connection_was_refused_goes_to_the_new_leader_once(leader):
    http = in_job(refusing_url())
    http.request("POST", "/api/v1/jobs", json={"name": "once"})
    assert leader.got == [("POST", "/api/v1/jobs", "Bearer leader-token")]


def test_a_job_request_over_the_plain_connection_follows_the_same_rule(leader):
    # submit and wait (Http.json_call) go over a kept http.client connection to a local server
    dying = Dying()
    with pytest.raises(errors.ServerUnavailable):
        in_job(dying.url).json_call("POST", "/api/v1/jobs", body={"name": "once"})
    assert dying.requests == 1 and leader.got == []
    http = in_job(Dying().url)
    assert json.loads(http.json_call("GET", "/api/v1/jobs/j-1/wait"))["status"] == "succeeded"
    in_job(refusing_url()).json_call("POST", "/api/v1/jobs", body={"name": "once"})
    assert leader.got == [("GET", "/api/v1/jobs/j-1/wait", "Bearer leader-token"),
                          ("POST", "/api/v1/jobs", "Bearer leader-token")]


def test_a_leader_its_home_does_not_announce_gets_no_token(leader, tmp_path):
    # a leader file naming a URL that its "home" does not announce: the home's token is not sent there
    (tmp_path / "shared.db.server.json").write_text(
        json.dumps({"url": leader.url, "home": str(tmp_path / "elsewhere")}))
    in_job(refusing_url()).request("GET", "/healthz")
    assert leader.got == [("GET", "/healthz", None)]


def test_outside_a_job_nothing_is_followed(leader, monkeypatch):
    monkeypatch.delenv(envvars.SERVER_FILE)
    with pytest.raises(errors.ServerUnavailable):
        in_job(refusing_url()).request("GET", "/healthz")
    assert leader.got == []


def test_the_clis_quick_wait_goes_on_at_the_new_leader(leader, tmp_path, monkeypatch):
    # `trainyard run JOB.yaml --wait` in a job: submitted to its server, which dies during the wait
    dying = Leader(lambda method: {"id": "j-1", "status": "running"} if method == "POST" else None)
    monkeypatch.setenv(envvars.SERVER, dying.url)
    spec = tmp_path / "job.yaml"
    spec.write_text("name: child\ncommand: [echo, hi]\n")
    try:
        assert quick.submit_and_wait(spec)["status"] == "succeeded"
    finally:
        dying.close()
    assert [m for m, _, _ in dying.got] == ["POST", "GET"]
    assert leader.got == [("GET", "/api/v1/jobs/j-1/wait?timeout=60", "Bearer leader-token")]


def test_the_rule():
    req = httpx.Request("POST", "http://x")
    refused, reset = httpx.ConnectError("refused", request=req), httpx.ReadError("reset", request=req)
    cut, slow = httpx.RemoteProtocolError("no answer", request=req), httpx.ReadTimeout("slow", request=req)
    assert may_resend("POST", refused) and may_resend("GET", reset) and may_resend("DELETE", cut)
    assert not may_resend("POST", reset) and not may_resend("POST", cut) and not may_resend("PATCH", reset)
    assert not may_resend("GET", slow)  # a slow server is not a gone one
    assert not may_resend("PUT", refused, content=iter([b"a stream"]))  # cannot be sent twice
