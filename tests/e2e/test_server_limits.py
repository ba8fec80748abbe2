"""How much of a request a real `trainyard server` holds: a body over 16 MiB is refused (413) before it is held, or
once a chunked one passes the bound, on every route that reads bodies whole, a launcher's report with a made-up
credential included; code uploads are bounded by the snapshot limit instead; a job's log past the server's log_keep
keeps its first and last half, and each of its metrics past metrics_keep evenly spaced points and the newest; a head over 64 KiB is refused (431) however it is routed; a flood
of requests that do not parse is not logged line by line."""

import hashlib
import socket
import sys

import httpx
import pytest

from tests.conftest import host_server
from tests.support.raw_http import whole_answers
from tests.support.servers import ServerProcess
from trainyard.api.guard import MAX_BODY
from trainyard.errors import BodyTooLarge

pytestmark = pytest.mark.slow


def _head_answer(url: str, head: str) -> bytes:
    """The answer to a request of which only ``head`` is sent: a server that waited for the body would time out."""
    got = b""
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=20) as conn:
        conn.sendall(head.encode())
        while not whole_answers(got) and (chunk := conn.recv(65536)):
            got += chunk
    return got


@pytest.mark.parametrize("path, auth", [
    ("/api/v1/jobs", "server"),
    ("/api/v1/services", "server"),
    ("/internal/attempts/a-1/replicas/0/report", "Bearer made-up"),
], ids=["a job", "a service", "a report with a made-up credential"])
def test_a_declared_body_over_the_bound_is_refused_before_it_is_read(server, path, auth):
    authorization = server.headers["Authorization"] if auth == "server" else auth
    got = _head_answer(server.url, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {authorization}\r\n"
                                   f"Content-Type: application/json\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 413 ")
    assert b'"code":"body_too_large"' in got.replace(b" ", b"")


def test_a_chunked_body_is_refused_once_it_passes_the_bound_and_the_sdk_names_the_error(server):
    sent = 0

    def chunks():
        nonlocal sent
        while sent <= MAX_BODY + (4 << 20):
            sent += 1 << 20
            yield b" " * (1 << 20)

    r = httpx.post(server.url + "/api/v1/jobs", headers={**server.headers, "Content-Type": "application/json"},
                   content=chunks(), timeout=60)
    assert r.status_code == 413 and r.json()["code"] == "body_too_large"
    # a spec the SDK refuses itself (an env var past MAX_ARG_STRLEN), sent as it is: the answer named as the SDK names it
    spec = {"name": "big", "command": ["true"], "env_vars": {"X": "x" * (MAX_BODY + 1)}}
    with pytest.raises(BodyTooLarge, match="larger than 16 MiB"):
        server.client().http.json_call("POST", "/api/v1/jobs", body={"spec": spec})
    assert server.client().submit({"name": "small", "command": ["true"]}).wait(timeout=60).status == "succeeded"


def test_a_code_upload_over_the_bound_is_taken(server):
    body = b"\0" * (MAX_BODY + (1 << 20))
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    r = httpx.put(f"{server.url}/api/v1/snapshots/{digest}", headers=server.headers, content=body, timeout=60)
    assert r.status_code == 201, r.text


@pytest.fixture
def small_snapshots(tmp_path, monkeypatch):
    """A server that takes code snapshots of 1 MiB at most (the test's own requests do not pack any)."""
    monkeypatch.setenv("TRAINYARD_SNAPSHOT_MAX", "1Mi")
    srv = host_server(tmp_path / "home")
    yield srv
    srv.stop_all()


def test_a_code_upload_over_the_servers_snapshot_limit_is_refused_before_it_is_kept(small_snapshots):
    server = small_snapshots
    url = f"{server.url}/api/v1/snapshots/sha256:{'0' * 64}"
    auth = server.headers["Authorization"]
    # a declared length over the limit, or a digest that is not one: answered before a byte of the body is sent
    got = _head_answer(server.url, f"PUT /api/v1/snapshots/sha256:{'0' * 64} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                   f"Authorization: {auth}\r\nContent-Length: {2 << 20}\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 413 ") and b"larger than 1Mi" in got and b"TRAINYARD_SNAPSHOT_MAX" in got
    got = _head_answer(server.url, f"PUT /api/v1/snapshots/md5:abc HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                   f"Authorization: {auth}\r\nContent-Length: {2 << 20}\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 422 ") and b"invalid path parameter digest: expected sha256:" in got
    # a body of no declared length is refused once it passes the limit
    chunks = (b"\0" * (64 << 10) for _ in range(48))  # 3 MiB
    r = httpx.put(url, headers=server.headers, content=chunks, timeout=60)
    assert r.status_code == 413 and r.json()["code"] == "body_too_large", r.text
    # under the limit, it is kept
    body = b"\1" * (512 << 10)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    r = httpx.put(f"{server.url}/api/v1/snapshots/{digest}", headers=server.headers, content=body, timeout=60)
    assert r.status_code == 201, r.text
    assert httpx.head(f"{server.url}/api/v1/snapshots/{digest}", headers=server.headers).status_code == 200


def test_a_head_over_64_kib_is_refused_with_431(server):
    got = _head_answer(server.url, f"GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: {'a' * 70_000}\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 431 ")
    assert httpx.get(server.url + "/api/v1/jobs", headers={**server.headers, "X-A": "a" * 60_000}).status_code == 200


def test_a_flood_of_requests_that_do_not_parse_leaves_a_line_in_the_log_not_one_each(server):
    for _ in range(200):
        assert _head_answer(server.url, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A : b\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    logged = server.log_path.read_text().count("Invalid HTTP request received.")
    assert 1 <= logged <= 2, server.log_path.read_text()[-2000:]


def test_a_jobs_log_and_metrics_past_the_servers_bounds_keep_their_ends(tmp_path):
    config = tmp_path / "server.yaml"
    config.write_text("log_keep: 1Mi\nmetrics_keep: 100\n")
    srv = ServerProcess(tmp_path / "home", ["--config", str(config), "--container-runtime", "none"])
    srv.start()
    try:
        # 7.2 MB of numbered lines, as fast as the job can print them
        chatty = "import sys\nfor i in range(300_000): sys.stdout.write(f'line {i:08d} of 300000\\n')"
        job = srv.client().submit({"name": "chatty", "command": [sys.executable, "-c", chatty]})
        assert job.wait(timeout=120).status == "succeeded"
        out = srv.cli("logs", job.id)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == "line 00000000 of 300000" and lines[-1] == "line 00299999 of 300000"
        said = "[trainyard: this log passed 1Mi; the server keeps its first 512Ki"
        [note] = [x for x in lines if x.startswith(said)]
        kept = len(out.stdout.encode()) - len(note.encode()) - 2  # the note's own line breaks
        # half and half, never more, and less by at most the bytes since the last cut (64Ki for a bound of 1Mi)
        assert (1 << 20) - (64 << 10) <= kept <= 1 << 20, kept
        assert "line 00150000 of 300000" not in out.stdout  # the middle is not kept

        # 20,000 steps logged as fast as the job can: every 256th stays, and the newest; a rare metric keeps all
        steps = ("import trainyard\nfor i in range(20_000):\n    trainyard.log_metrics(step=i, loss=1 / (i + 1))\n"
                 "    if i % 500 == 0: trainyard.log_metrics(step=i, val=i / 20_000)")
        job = srv.client().submit({"name": "steps", "command": [sys.executable, "-c", steps]})
        assert job.wait(timeout=120).status == "succeeded"
        points = srv.client().metrics(job.id)
        assert [p.step for p in points if p.name == "loss"] == [*range(0, 20_000, 256), 19_999]
        assert [p.step for p in points if p.name == "val"] == list(range(0, 20_000, 500))
    finally:
        srv.stop_all()
