"""The bounds on a request's head (api/bounded_http.py), on a real uvicorn server in a thread speaking the protocol
``trainyard server`` runs when the ``/serve/`` lane is off: a head over 64 KiB is answered 431 and its connection
closed before the app sees it, however slowly or endlessly it comes; a connection that sends no whole head in time
is closed; heads under the bound, bodies of any size, pipelined requests and answers that take longer than the head
may pass as before. (The lane's protocol, which builds on it, is tried in test_serve_hostile.py.)"""

from __future__ import annotations

import socket
import threading
import time

import asyncio

import pytest
import uvicorn

from tests.support.waiting import until
from trainyard.api import bounded_http
from trainyard.api.bounded_http import MAX_HEAD, BoundedProtocol

seen: list[tuple[str, int]] = []  # (path, body bytes) of each request the app got


async def app(scope, receive, send):  # noqa: ANN001, ANN201
    if scope["type"] != "http":
        return
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    seen.append((scope["path"], size))
    if scope["path"] == "/sleep":  # an answer that takes longer than a head may
        await asyncio.sleep(1.5)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(scope="module")
def port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, http=BoundedProtocol, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    until(lambda: server.started, timeout=30)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(30)


def _send(port: int, data: bytes, answers: int = 1) -> bytes:
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        conn.sendall(data)
        while got.count(b"HTTP/1.1 ") < answers or not got.endswith((b"ok", b"KiB")):
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += chunk
    return got


def _get(path: str, header: int = 0) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * header}\r\n\r\n".encode()


def test_a_head_under_the_bound_and_a_large_body_pass(port):
    seen.clear()
    assert _send(port, _get("/near", MAX_HEAD - 200)).startswith(b"HTTP/1.1 200 ")
    body = b"b" * (4 * MAX_HEAD)
    posted = _send(port, b"POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert posted.startswith(b"HTTP/1.1 200 ")
    assert seen == [("/near", 0), ("/body", len(body))]


def test_a_head_over_the_bound_is_answered_431_and_never_reaches_the_app(port):
    seen.clear()
    got = _send(port, _get("/over", MAX_HEAD + 10))
    assert got.startswith(b"HTTP/1.1 431 ") and b"connection: close" in got
    assert seen == []


def test_a_header_that_never_ends_is_cut_off_after_the_bound(port):
    seen.clear()
    sent, got = 0, b""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        conn.sendall(b"GET /endless HTTP/1.1\r\nHost: x\r\nX-Endless: ")
        try:
            for _ in range(16 * 1024):  # 64 MiB if nothing stopped it
                conn.sendall(b"a" * 4096)
                sent += 4096
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            while chunk := conn.recv(65536):
                got += chunk
        except ConnectionResetError:  # closed with our bytes still unread on its side
            pass
    assert sent < 64 * 1024 * 1024, "the server read a 64 MiB header"
    assert got == b"" or got.startswith(b"HTTP/1.1 431 ")
    assert seen == []


def test_pipelined_requests_and_a_head_sent_byte_by_byte_pass(port):
    seen.clear()
    assert _send(port, _get("/one") + _get("/two"), answers=2).count(b"HTTP/1.1 200 ") == 2
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        for byte in _get("/slow", 100):
            conn.sendall(bytes([byte]))
            time.sleep(0.0005)
        assert conn.recv(65536).startswith(b"HTTP/1.1 200 ")
    assert [path for path, _ in seen] == ["/one", "/two", "/slow"]


def _closed_after(conn: socket.socket) -> tuple[float, bytes]:
    """Seconds until the server closed ``conn``, and what it sent before."""
    began, got = time.monotonic(), b""
    while chunk := conn.recv(65536):
        got += chunk
    return time.monotonic() - began, got


def test_a_connection_without_a_whole_head_in_time_is_closed_and_a_slow_answer_is_not(port, monkeypatch):
    monkeypatch.setattr(bounded_http, "HEAD_TIMEOUT", 0.5)
    seen.clear()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as silent, \
            socket.create_connection(("127.0.0.1", port), timeout=20) as partial:
        partial.sendall(b"GET /partial HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        waited, got = _closed_after(silent)
        assert got == b"" and waited < 10
        waited, got = _closed_after(partial)
        assert got.startswith(b"HTTP/1.1 408 ") and waited < 10
    with socket.create_connection(("127.0.0.1", port), timeout=20) as kept:
        kept.sendall(_get("/sleep"))  # 1.5 s to answer, three times the head's time
        assert kept.recv(65536).startswith(b"HTTP/1.1 200 ")
        time.sleep(0.8)  # and a second head that starts late on the kept-alive connection, then is slow
        kept.sendall(b"GET /late HTTP/1.1\r\n")
        waited, got = _closed_after(kept)
        assert got.startswith(b"HTTP/1.1 408 ") and waited < 10
    assert [path for path, _ in seen] == ["/sleep"]


def test_a_client_that_pipelines_too_many_gets_the_answers_owed_then_a_close(port):
    seen.clear()
    got = _send(port, _get("/sleep") + b"".join(_get(f"/p{i}") for i in range(100)), answers=101)
    answered = got.count(b"HTTP/1.1 200 ")
    # the one being answered and MAX_PIPELINED queued behind it: answered in order, then the connection closes
    assert answered == 1 + bounded_http.MAX_PIPELINED, got[-300:]
    assert [path for path, _ in seen] == ["/sleep"] + [f"/p{i}" for i in range(bounded_http.MAX_PIPELINED)]
    seen.clear()
    assert _send(port, b"".join(_get(f"/q{i}") for i in range(10)), answers=10).count(b"HTTP/1.1 200 ") == 10
    assert len(seen) == 10
