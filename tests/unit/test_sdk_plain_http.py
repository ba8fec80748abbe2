"""The SDK's kept plain connection (submit and wait to the local server): what it sends, when it is
used, and that a request it cannot finish is sent again only where httpx's path would: real
sockets on 127.0.0.1."""

import json
import os
import socket
import threading
import time

import httpx
import pytest

from tests.support.stub_http import JsonServer, Unanswering
from trainyard import errors
from trainyard.sdk.http import Http
from trainyard.sdk.plain_http import AnswerReader, plain_http_for


def KeepAlive(answer=lambda method, path: (200, {"ok": True}), close_after: bool = False) -> JsonServer:
    """Kept-alive HTTP/1.1 answering ``answer(method, path)`` as ``(status, JSON)``; records each request
    as a dict of its method, path, the client's port, its headers and body."""
    return JsonServer(answer, lambda request: request._asdict(), close_after=close_after)


def Silent() -> Unanswering:
    """A server that reads a request and never answers."""
    return Unanswering(hold=True)


class Scripted:
    """A server that answers each request it reads with the next of ``answers`` (raw bytes), then
    closes the connection if the answer is followed by ``None``."""

    def __init__(self, answers: list) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.answers, self.requests = list(answers), []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while self.answers:
            conn, _ = self.sock.accept()
            with conn:
                data = b""
                while self.answers and self.answers[0] is not None:
                    while b"\r\n\r\n" not in data:
                        data += conn.recv(65536)
                    head, _, data = data.partition(b"\r\n\r\n")
                    self.requests.append(head.decode())
                    conn.sendall(self.answers.pop(0))
                if self.answers:
                    self.answers.pop(0)


@pytest.fixture
def server():
    srv = KeepAlive()
    yield srv
    srv.close()


def test_a_job_request_goes_as_httpx_would_send_it(server):
    http = Http(server.url, "tok")
    assert json.loads(http.json_call("POST", "/api/v1/jobs", body={"spec": {"name": "é"}})) == {"ok": True}
    assert json.loads(http.json_call("GET", "/api/v1/jobs/j-1/wait", query={"timeout": 60.0}, timeout=70)) == {"ok": True}
    post, wait = server.got
    assert post["headers"]["Authorization"] == "Bearer tok" and post["headers"]["Content-Type"] == "application/json"
    assert post["body"] == httpx.Request("POST", server.url, json={"spec": {"name": "é"}}).content
    assert wait["path"] == "/api/v1/jobs/j-1/wait?timeout=60.0" and wait["headers"]["Authorization"] == "Bearer tok"
    assert post["port"] == wait["port"]  # one connection, kept


def test_a_connection_the_server_closed_while_idle_is_replaced():
    srv = KeepAlive(close_after=True)
    try:
        http = Http(srv.url, None)
        http.json_call("GET", "/a")
        time.sleep(0.1)  # the server's close has arrived
        http.json_call("POST", "/b", body={})
        assert [g["path"] for g in srv.got] == ["/a", "/b"]  # each once
        assert srv.got[0]["port"] != srv.got[1]["port"] and "Authorization" not in srv.got[0]["headers"]
    finally:
        srv.close()


def test_an_error_answer_is_the_servers_typed_error():
    missing = errors.JobNotFound("no such job: j-x", job_id="j-x")
    srv = KeepAlive(lambda method, path: (404, missing.to_dict()) if "j-x" in path else (500, ["no code"]))
    try:
        http = Http(srv.url, None)
        with pytest.raises(errors.JobNotFound) as e:
            http.json_call("GET", "/api/v1/jobs/j-x/wait")
        assert e.value.details == {"job_id": "j-x"}
        with pytest.raises(errors.TrainyardError, match="HTTP 500 from .*/other"):
            http.json_call("GET", "/other")
    finally:
        srv.close()


def test_a_wait_that_times_out_is_not_sent_again():
    silent = Silent()
    http = Http(silent.url, None)
    with pytest.raises(errors.ServerUnavailable):
        http.json_call("GET", "/api/v1/jobs/j-1/wait", query={"timeout": 0}, timeout=0.3)
    assert silent.requests == 1  # a slow server is not a gone one


def test_a_server_that_is_gone_is_unavailable_as_through_httpx():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens once it is closed
    with pytest.raises(errors.ServerUnavailable, match="cannot reach the trainyard server"):
        Http(url, None).json_call("POST", "/api/v1/jobs", body={})


def test_used_only_for_plain_http_to_this_machine(monkeypatch, server):
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    assert plain_http_for("http://127.0.0.1:8000") and plain_http_for("http://localhost:1/x")
    assert plain_http_for("http://[::1]:8000")
    assert not plain_http_for("https://127.0.0.1:8000") and not plain_http_for("http://10.0.0.5:8000")
    assert not plain_http_for("http://127.example.com:8000")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")  # httpx would send it through the proxy
    assert not plain_http_for("http://127.0.0.1:8000")
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"mock": True}))
    monkeypatch.delenv("HTTP_PROXY")
    assert json.loads(Http(server.url, None, transport=transport).json_call("GET", "/x")) == {"mock": True}
    assert server.got == []


def test_answers_in_chunks_or_up_to_the_close_are_read_whole():
    srv = Scripted([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"5;x=y\r\n{\"a\":\r\n2\r\n1}\r\n0\r\nX-Trailer: t\r\n\r\n",
                    b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"b\":2}",
                    b"HTTP/1.0 200 OK\r\n\r\n{\"c\":3}", None])
    http = Http(srv.url, None)
    assert [json.loads(http.json_call("GET", f"/{n}")) for n in "abc"] == [{"a": 1}, {"b": 2}, {"c": 3}]
    assert [r.split(" ")[1] for r in srv.requests] == ["/a", "/b", "/c"]  # on one connection


def test_a_path_a_url_cannot_hold_as_it_is_goes_through_httpx(server):
    Http(server.url, None).json_call("GET", "/api/v1/jobs/a b é/wait")
    assert server.got[0]["path"] == "/api/v1/jobs/a%20b%20%C3%A9/wait"


def test_an_answer_cut_off_by_an_interrupt_is_not_taken_for_the_next_one(server, monkeypatch):
    http = Http(server.url, None)
    real_head = AnswerReader._head

    def interrupted(self):  # Ctrl-C once the head is read, its body still in the buffer
        monkeypatch.setattr(AnswerReader, "_head", real_head)
        real_head(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(AnswerReader, "_head", interrupted)
    with pytest.raises(KeyboardInterrupt):
        http.json_call("GET", "/first")
    assert json.loads(http.json_call("POST", "/second", body={})) == {"ok": True}
    assert [g["path"] for g in server.got] == ["/first", "/second"]


def test_a_forked_child_makes_its_own_connection(server):
    http = Http(server.url, None)
    http.json_call("GET", "/parent")
    pid = os.fork()
    if pid == 0:  # the child: its answer must be its own, on a connection of its own
        ok = json.loads(http.json_call("GET", "/child")) == {"ok": True}
        os._exit(0 if ok else 1)
    assert os.waitpid(pid, 0)[1] == 0
    http.json_call("GET", "/parent-again")
    ports = {g["path"]: g["port"] for g in server.got}
    assert ports["/parent"] == ports["/parent-again"] != ports["/child"]
