"""The short way for small /serve/ requests (api/serve_lane.py), on a real server (uvicorn in a thread, with the
protocol `trainyard server` runs) and a real replica process (tests/support/replica_app.py): what takes the lane,
that its answers are those of the usual way, pipelining on one connection, and a caller that leaves mid-answer."""

from __future__ import annotations

import socket
import sys
import time
from collections import Counter

import httpx
import pytest

from tests.support.lane_server import APP, AUTH, TOKEN, served, warm  # noqa: F401  (served: the fixture)
from tests.support.waiting import until
from trainyard.api import serve_express
from trainyard.sdk.client import Client
from trainyard.services import serving

pytestmark = pytest.mark.slow


def test_a_small_request_takes_the_lane_and_gets_what_the_usual_way_gives(served):
    url, lane, _, _ = served
    with httpx.Client(headers=AUTH) as http:
        warm(url)
        before = lane.taken
        short = http.get(url + "/serve/echo/whoami?x=1", headers={"X-Trace": "t1"})
        assert lane.taken == before + 1
        # a cookie sends it the usual way (the sign-in cookie is taken out there)
        usual = http.get(url + "/serve/echo/whoami?x=1", headers={"X-Trace": "t1", "Cookie": "a=b"})
        assert lane.taken == before + 1
    assert short.status_code == usual.status_code == 200
    assert short.headers.keys() == usual.headers.keys() and short.headers["server"] == "uvicorn"
    assert len(short.headers.get_list("date")) == 1
    seen, seen_usual = short.json(), usual.json()
    assert seen["path"] == seen_usual["path"] == "/whoami?x=1"
    assert seen["pid"] == seen_usual["pid"]
    assert {k: v for k, v in seen_usual["headers"].items() if k.lower() != "cookie"} == seen["headers"]
    got = {k.lower(): v for k, v in seen["headers"].items()}
    assert got["x-forwarded-prefix"] == "/serve/echo" and got["x-trace"] == "t1"
    assert got["x-forwarded-for"] == "127.0.0.1" and "authorization" not in got


def test_bodies_a_streamed_answer_and_head_pass_on_the_lane(served):
    url, lane, _, _ = served
    warm(url)
    before = lane.taken
    with httpx.Client(headers=AUTH, timeout=30) as http:
        posted = http.post(url + "/serve/echo/echo", content=b"x" * 100_000)
        assert posted.status_code == 200 and posted.json()["body"] == "x" * 100_000
        with http.stream("GET", url + "/serve/echo/stream?n=24") as down:
            assert down.headers["transfer-encoding"] == "chunked"
            got = b"".join(down.iter_bytes())
        assert got == b"".join(bytes([k]) * 0x10000 for k in range(24))
        head = http.head(url + "/serve/echo/whoami")
        assert head.status_code in (200, 501) and head.content == b""
    assert lane.taken == before + 3
    # a body too big to hold, or one sent chunked, goes the usual way
    big = httpx.post(url + "/serve/echo/echo", headers=AUTH, content=b"y" * (2 << 20), timeout=30)
    assert big.status_code == 200 and len(big.json()["body"]) == 2 << 20
    assert lane.taken == before + 3


def test_refusals_and_unknown_services_go_the_usual_way(served):
    url, lane, _, _ = served
    warm(url)
    before = lane.taken
    assert httpx.get(url + "/serve/echo/whoami", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(url + "/serve/echo/whoami").status_code == 401
    assert httpx.get(url + "/serve/nope/x", headers=AUTH).status_code == 404
    assert httpx.get(url + "/serve/echo/whoami", headers={**AUTH, "Host": "evil.example"}).status_code == 421
    assert lane.taken == before


def _request(path: str, extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n{extra}\r\n".encode()


def _answers(conn: socket.socket, n: int) -> list[bytes]:
    """``n`` answers with a content-length, in the order they came."""
    data, out = b"", []
    conn.settimeout(30)
    while len(out) < n:
        head, sep, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), None) if sep else None
        if length is not None and len(rest) >= length:
            out.append(rest[:length])
            data = rest[length:]
            continue
        chunk = conn.recv(65536)
        assert chunk, f"closed after {len(out)} answers"
        data += chunk
    return out


def _connect(url: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])))


def test_pipelined_requests_on_one_connection_are_answered_in_order(served):
    url, lane, _, _ = served
    warm(url)
    before = lane.taken
    with _connect(url) as conn:
        # the first takes the lane and is slow; the second and third arrive while it is in flight
        conn.sendall(_request("/serve/echo/slow?s=0.5") + _request("/serve/echo/whoami?n=2")
                     + _request("/healthz"))
        first, second, third = _answers(conn, 3)
        conn.sendall(_request("/serve/echo/whoami?n=4"))  # the connection is kept: the lane again
        fourth, = _answers(conn, 1)
    assert b"slow" in first or b"pid" in first
    assert b'"/whoami?n=2"' in second and b"ok" in third and b'"/whoami?n=4"' in fourth
    assert lane.taken == before + 2  # the first and the fourth


def test_a_connection_in_use_stays_open_and_one_left_idle_is_closed_after_the_keep_alive(served):
    url, lane, _, server = served
    warm(url)
    before = lane.taken
    idle = 2.0
    server.config.timeout_keep_alive = idle  # read by each new connection
    try:
        with _connect(url) as conn:
            conn.settimeout(30)
            # longer in all than the keep-alive, each pause shorter: the timer armed after the first answer must
            # look again, not close the connection under the requests that follow
            # (the replica's slow answer outlasts the keep-alive while under way)
            for i, path in enumerate(["/serve/echo/whoami?k=1", "/healthz", "/serve/echo/whoami?k=2", "/healthz",
                                      "/serve/echo/whoami?k=3", "/serve/echo/slow?s=2.5", "/serve/echo/whoami?k=4"]):
                if i:
                    time.sleep(idle * 0.3)
                conn.sendall(_request(path))
                body, = _answers(conn, 1)
                assert (b"ok" if path == "/healthz" else path.removeprefix("/serve/echo").encode()) in body, body
            last = time.monotonic()
            assert conn.recv(1) == b""  # closed by the server once idle
            assert time.monotonic() - last >= idle * 0.9
    finally:
        server.config.timeout_keep_alive = 5
    assert lane.taken == before + 5


def test_a_caller_that_leaves_mid_answer_frees_the_replica_and_the_count(served):
    url, lane, platform, _ = served
    warm(url)
    before = lane.taken
    with _connect(url) as conn:
        conn.sendall(_request("/serve/echo/stream?n=2000"))  # 125 MiB: far more than the buffers hold
        conn.settimeout(30)
        assert conn.recv(65536).startswith(b"HTTP/1.1 200")
    assert lane.taken == before + 1
    until(lambda: platform.serving.traffic.in_flight("echo") == 0 and not platform.serving.outstanding, timeout=30)
    assert httpx.get(url + "/serve/echo/whoami", headers=AUTH).status_code == 200


def test_a_kept_alive_connection_the_replica_dropped_is_sent_again_for_a_get_and_answers_502_for_a_post(served):
    url, lane, platform, _ = served
    warm(url)
    traffic = platform.serving.traffic
    with httpx.Client(headers=AUTH, timeout=30) as http:
        assert http.get(url + "/serve/echo/whoami").status_code == 200  # a connection now waits in the pool
        before, counted = lane.expressed, traffic.snapshot("echo")
        # answered on the connection that then waits for reuse; the replica drops it at the next request
        assert http.get(url + "/serve/echo/drop-next").status_code == 200
        again = http.get(url + "/serve/echo/whoami?after=drop")
        assert again.status_code == 200 and again.json()["path"] == "/whoami?after=drop"
        assert lane.expressed == before + 2  # both were sent at once; the second again on a new connection
        assert http.post(url + "/serve/echo/drop-next", content=b"{}").status_code == 200
        lost = http.post(url + "/serve/echo/echo", content=b"{}")  # the replica may have acted on it: not resent
        assert lost.status_code == 502
        assert "closed the connection without an answer" in lost.json()["message"]
        assert http.get(url + "/serve/echo/whoami").status_code == 200
    after = traffic.snapshot("echo")
    assert (after.requests - counted.requests, after.errors - counted.errors, after.in_flight) == (5, 1, 0)
    assert not platform.serving.outstanding


def test_an_answer_too_big_to_hold_is_passed_on_as_it_comes(served):
    url, lane, platform, _ = served
    warm(url)
    with httpx.Client(headers=AUTH, timeout=30) as http:
        assert http.get(url + "/serve/echo/whoami").status_code == 200
        before = lane.expressed
        big = http.get(url + "/serve/echo/big?n=3000000")
        small = http.get(url + "/serve/echo/big?n=10")
    assert big.status_code == 200 and big.headers["content-length"] == "3000000" and big.content == b"b" * 3000000
    assert small.content == b"b" * 10
    assert lane.expressed == before + 2
    until(lambda: platform.serving.traffic.in_flight("echo") == 0 and not platform.serving.outstanding, timeout=30)


def test_a_replica_silent_past_the_read_timeout_answers_502(served, monkeypatch):
    url, lane, platform, _ = served
    warm(url)
    monkeypatch.setattr(serve_express, "READ_TIMEOUT", 0.5)
    monkeypatch.setattr(serve_express, "WATCH_EVERY", 0.1)
    with httpx.Client(headers=AUTH, timeout=30) as http:
        assert http.get(url + "/serve/echo/whoami").status_code == 200
        before = lane.expressed
        silent = http.get(url + "/serve/echo/slow?s=20")
    assert lane.expressed == before + 1
    assert silent.status_code == 502 and "sent nothing for 0.5s" in silent.json()["message"]
    assert silent.elapsed.total_seconds() < 10  # the watchdog may first wait out its last WATCH_EVERY (5 s)
    until(lambda: platform.serving.traffic.in_flight("echo") == 0 and not platform.serving.outstanding, timeout=30)


@pytest.fixture(scope="module")
def pair(served):
    """A service of two replicas (the tests that use it run in this order: the last one breaks a replica)."""
    url, _, _, _ = served
    client = Client(url, token=TOKEN)
    client.services.apply({"name": "pair", "command": [sys.executable, APP], "resources": {"cpu": 0.5},
                           "service": {"replicas": 2, "readiness": {"path": "/healthz", "period": "0.2s"}}})
    client.services.wait_ready("pair", 2, timeout=60)
    yield
    client.services.delete("pair")
    until(lambda: not any(s.replicas for s in client.services.list() if s.name == "pair"), timeout=30)


def test_requests_on_the_lane_are_spread_over_the_replicas_with_or_without_a_waiting_connection(served, pair):
    url, lane, platform, _ = served
    before = lane.taken
    # each on a new connection: at first only one replica has a connection waiting in the server's pool
    pids = [httpx.get(url + "/serve/pair/whoami", headers=AUTH).json()["pid"] for _ in range(10)]
    assert lane.taken >= before + 9  # the first may go the usual way: it caches the route
    spread = Counter(pids)
    # when the lane picked again for the replica without a waiting connection, all 10 went to the other
    assert len(spread) == 2 and min(spread.values()) >= 4, spread
    until(lambda: not platform.serving.outstanding, timeout=30)


def test_a_get_a_replica_hangs_up_on_goes_to_the_other_replica(served, pair):
    url, lane, platform, _ = served
    traffic = platform.serving.traffic
    with httpx.Client(headers=AUTH, timeout=30) as http:
        assert http.get(url + "/serve/pair/whoami").status_code == 200  # the route is cached: the lane is open
        _, base = platform.serving.route("pair").endpoints[0]
        # from now on that replica closes every connection unanswered (its readiness probe still passes)
        hung = httpx.get(base + "/hang-up").json()["pid"]
        counted = traffic.snapshot("pair")
        # on kept-alive connections (the lane) and new ones, with a cookie (the usual way)
        answers = [http.get(url + "/serve/pair/whoami") for _ in range(4)]
        answers += [httpx.get(url + "/serve/pair/whoami", headers=AUTH) for _ in range(4)]
        answers += [httpx.get(url + "/serve/pair/whoami", headers={**AUTH, "Cookie": "a=b"}) for _ in range(4)]
    assert [a.status_code for a in answers] == [200] * 12
    assert hung not in {a.json()["pid"] for a in answers}
    after = traffic.snapshot("pair")
    assert (after.requests - counted.requests, after.errors - counted.errors) == (12, 0)
    until(lambda: not platform.serving.outstanding, timeout=30)
