"""Hostile requests to ``/serve/``, sent as raw bytes to a real server (the lane's protocol, as ``trainyard server``
runs it) in front of a real replica: each gets a clear answer (never a 500, never a hang), none smuggles a request
past the proxy to the replica, and the server goes on answering after all of them.

The lane (api/serve_lane.py) reads request heads itself before uvicorn's app sees them; these are the cases an
HTTP parser in front of someone else's server is attacked with: framing that two parsers may read differently,
names and targets that decode to something else, headers that claim to be the proxy's own."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from tests.support.lane_server import AUTH, TOKEN, served, warm  # noqa: F401  (served: the fixture)
from tests.support.raw_http import whole_answers

pytestmark = pytest.mark.slow
AUTH_LINE = f"Authorization: Bearer {TOKEN}\r\n"
SMUGGLED = "GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _head(target: str = "/serve/echo/whoami", extra: str = "", method: str = "GET", host: str = "127.0.0.1",
          auth: bool = True) -> str:
    return f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n{AUTH_LINE if auth else ''}{extra}\r\n"


def _smuggling(body_first: str) -> str:
    return body_first + SMUGGLED


# (case, the raw request, the status it gets: what llhttp, uvicorn, the Guard, the lane or the replica answers; a set
# where another version of the parser may answer otherwise, rightly)
CASES: list[tuple[str, bytes, int | set[int]]] = [
    ("no token", _head(auth=False).encode(), 401),
    ("a wrong token", _head(auth=False, extra="Authorization: Bearer nope\r\n").encode(), 401),
    ("a token twice, one wrong", _head(extra="Authorization: Bearer nope\r\n").encode(), 401),
    ("an unknown service", _head("/serve/nope/x").encode(), 404),
    ("a percent-encoded name", _head("/serve/ec%68o/whoami").encode(), 200),
    ("a NUL in the name", _head("/serve/ec%00ho/whoami").encode(), 404),
    ("a raw NUL in the target", b"GET /serve/ec\x00ho/whoami HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
    ("a 5,000-byte name", _head("/serve/" + "a" * 5000 + "/x").encode(), 404),
    ("dots for a name", _head("/serve/../api/v1/jobs").encode(), 404),
    ("no name", _head("/serve//whoami").encode(), 404),
    ("absolute form", _head("http://127.0.0.1/serve/echo/whoami").encode(), 200),
    ("the wrong Host", _head(host="evil.example").encode(), 421),
    ("no Host", f"GET /serve/echo/whoami HTTP/1.1\r\n{AUTH_LINE}\r\n".encode(), 421),
    ("two Hosts", _head(extra="Host: evil.example\r\n").encode(), 421),
    ("HTTP/1.0", f"GET /serve/echo/whoami HTTP/1.0\r\nHost: 127.0.0.1\r\n{AUTH_LINE}\r\n".encode(), 200),
    # the llhttp here reads any major.minor: it goes the usual way and reaches the replica as HTTP/1.1, then closes
    ("HTTP/2.0 in an HTTP/1 head", _head().replace("HTTP/1.1", "HTTP/2.0", 1).encode(), {200, 400, 505}),
    ("a lower-case method", _head(method="get").encode(), 400),
    ("CONNECT", _head("127.0.0.1:22", method="CONNECT").encode(), 400),
    ("a length and chunked both", (_head("/serve/echo/echo", "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
                                         "POST") + _smuggling("0\r\n\r\n")).encode(), 400),
    ("two different lengths", (_head("/serve/echo/echo", "Content-Length: 4\r\nContent-Length: 40\r\n", "POST")
                               + "abcd").encode(), 400),
    ("a negative length", (_head("/serve/echo/echo", "Content-Length: -1\r\n", "POST")).encode(), 400),
    ("a huge length", (_head("/serve/echo/echo", "Content-Length: 99999999999999999999999\r\n", "POST")).encode(),
     400),
    ("a length with a plus", (_head("/serve/echo/echo", "Content-Length: +4\r\n", "POST") + "abcd").encode(),
     400),
    ("chunked then identity", (_head("/serve/echo/echo", "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
                                     "POST") + "4\r\nabcd\r\n0\r\n\r\n").encode(), 400),
    ("a bad chunk size", (_head("/serve/echo/echo", "Transfer-Encoding: chunked\r\n", "POST")
                          + _smuggling("zz\r\nabcd\r\n0\r\n\r\n")).encode(), 400),
    ("a request hidden in a body", (_head("/serve/echo/echo", f"Content-Length: {len(SMUGGLED)}\r\n", "POST")
                                    + SMUGGLED).encode(), 200),
    ("obsolete line folding", _head(extra="X-A: one\r\n two\r\n").encode(), 400),
    ("a bare CR in a header", _head(extra="X-A: one\rX-B: two\r\n").encode(), 400),
    ("bare LF line ends", _head().replace("\r\n", "\n").encode(), 400),
    ("a NUL in a header value", _head(extra="X-A: a\x00b\r\n").encode(), 400),
    ("a space before the colon", _head(extra="X-A : b\r\n").encode(), 400),
    ("a 100 KB header", _head(extra=f"X-A: {'a' * 100_000}\r\n").encode(), 431),  # the server's (bounded_http)
    # under 64 KiB, so it reaches the replica, whose http.server takes at most 100 headers
    ("2,000 headers", _head(extra="".join(f"X-{i}: v\r\n" for i in range(2000))).encode(), 431),
    ("latin-1 in a header", _head().encode() [:-2] + b"X-A: caf\xe9\r\n\r\n", 200),
    ("an encoded CRLF in the target", _head("/serve/echo/whoami?a=%0d%0aX-Injected:%20yes").encode(), 200),
    ("Expect: 100-continue", (_head("/serve/echo/echo", "Content-Length: 2\r\nExpect: 100-continue\r\n", "POST")
                              + "hi").encode(), 200),
    ("an h2c upgrade", _head(extra="Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n")
     .encode(), 200),
    ("a WebSocket upgrade to a plain path", _head(extra="Connection: Upgrade\r\nUpgrade: websocket\r\n"
                                                "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")
     .encode(), 200),
]


def _exchange(url: str, data: bytes, answers: int = 1, timeout: float = 20.0) -> tuple[int | None, bytes]:
    """The status of the first answer to ``data`` (None if the server closed without one) and every byte read,
    up to ``answers`` whole answers or the server's close; a server silent for ``timeout`` fails the test."""
    got = b""
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=timeout) as conn:
        conn.sendall(data)
        while whole_answers(got) < answers and (chunk := conn.recv(65536)):
            got += chunk
    while got.startswith(b"HTTP/1.1 100 "):  # Expect: 100-continue's interim answer
        got = got[got.find(b"\r\n\r\n") + 4:]
    if not got:
        return None, got
    status = got.split(b"\r\n", 1)[0].split(b" ")
    assert status[0] in (b"HTTP/1.1", b"HTTP/1.0") and status[1].isdigit(), got[:200]
    return int(status[1]), got


def _seen(url: str) -> list[str]:
    """The request lines the replica has read, but its readiness probes'."""
    seen = httpx.get(url + "/serve/echo/seen", headers=AUTH, timeout=20).json()["seen"]
    return [line for line in seen if " /healthz " not in line]


@pytest.mark.parametrize("case, data, expected", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_request_gets_a_clear_answer_and_smuggles_nothing(served, case, data, expected):
    url, _, _, _ = served
    warm(url)
    before = len(_seen(url))
    status, got = _exchange(url, data)
    assert status in ({expected} if isinstance(expected, int) else expected), f"{case}: {got[:300]!r}"
    seen = _seen(url)[before:]
    assert not any("/smuggled" in line for line in seen), f"{case}: the replica read {seen}"
    assert len(seen) <= 2, f"{case}: one request reached the replica as several: {seen}"  # it, and /seen
    assert httpx.get(url + "/serve/echo/whoami", headers=AUTH, timeout=20).status_code == 200


def test_what_the_replica_gets_for_spoofed_and_injected_headers(served):
    url, _, _, _ = served
    warm(url)
    status, got = _exchange(url, _head(extra="X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil.example\r\n"
                                             "X-Forwarded-Prefix: /fake\r\nX-Forwarded-User: admin\r\n"
                                             "Forwarded: for=6.6.6.6;by=evil\r\nX-Real-IP: 6.6.6.6\r\n").encode())
    assert status == 200
    headers = {k.lower(): v for k, v in json.loads(got.split(b"\r\n\r\n", 1)[1])["headers"].items()}
    assert headers["x-forwarded-for"] == "6.6.6.6, 127.0.0.1"  # extended, as proxies do: the caller's claim first
    assert headers["x-forwarded-host"] == "127.0.0.1" and headers["x-forwarded-prefix"] == "/serve/echo"
    # what only a proxy may say, claimed by the caller: dropped (a replica may trust them)
    assert not {"x-forwarded-user", "forwarded", "x-real-ip"} & set(headers)
    assert "authorization" not in headers
    status, got = _exchange(url, _head("/serve/echo/whoami?a=%0d%0aX-Injected:%20yes").encode())
    seen = json.loads(got.split(b"\r\n\r\n", 1)[1])
    assert status == 200 and seen["path"] == "/whoami?a=%0d%0aX-Injected:%20yes"
    assert not any(k.lower() == "x-injected" for k in seen["headers"])


def test_a_malformed_request_pipelined_after_a_valid_one_gets_400_and_the_connection_closed(served):
    # uvicorn answers 400 as soon as it reads the bad head, and closes: the valid request before it may or may not
    # be answered first (the usual way does the same), but nothing hangs and the bad one reaches no replica
    url, _, _, _ = served
    warm(url)
    before = len(_seen(url))
    _, got = _exchange(url, (_head() + "GET /serve/echo/smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A : b\r\n\r\n")
                       .encode(), answers=2)
    assert b"HTTP/1.1 400 " in got and b"connection: close" in got.lower()
    assert not any("/smuggled" in line for line in _seen(url)[before:])


def test_a_caller_that_stops_mid_head_does_not_hold_up_others(served):
    url, _, _, _ = served
    warm(url)
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=20) as stalled:
        stalled.sendall(b"GET /serve/echo/whoami HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Part")
        for _ in range(5):
            assert httpx.get(url + "/serve/echo/whoami", headers=AUTH, timeout=20).status_code == 200


@pytest.mark.parametrize("extra", ["", "Cookie: a=b\r\n"], ids=["the lane", "the usual way"])
def test_a_head_over_64_kib_is_refused_by_the_server_and_never_reaches_the_replica(served, extra):
    url, _, _, _ = served
    warm(url)
    before = len(_seen(url))
    status, got = _exchange(url, _head(extra=f"{extra}X-A: {'a' * 70_000}\r\n").encode())
    assert status == 431 and got.endswith(b"Request line and headers over 64 KiB")
    assert _seen(url)[before:] == ["GET /seen HTTP/1.1"]
    status, got = _exchange(url, _head(extra=f"{extra}X-A: {'a' * 60_000}\r\n").encode())
    assert status == 200 and len(json.loads(got.split(b"\r\n\r\n", 1)[1])["headers"]["x-a"]) == 60_000
