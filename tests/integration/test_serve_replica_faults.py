"""Replicas that break HTTP's rules on the hop to them, behind a real server (the lane's protocol, as ``trainyard
server`` runs it) and as a real process (tests/support/replica_app.py), the lane and the usual way alike: whatever a
replica sends, each caller gets the answer to its own request, and nothing more on its connection."""

from __future__ import annotations

import json
import socket
import time

import pytest

from tests.support.lane_server import TOKEN, served, warm  # noqa: F401  (served: the fixture)
from tests.support.raw_http import more_within, read_answer

pytestmark = pytest.mark.slow
WAYS = pytest.mark.parametrize("extra", ["", "Cookie: a=b\r\n"], ids=["the lane", "the usual way"])


def _send(url: str, target: str, extra: str, method: str = "GET") -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=20)
    conn.sendall(_request(target, extra, method))
    return conn


def _request(target: str, extra: str = "", method: str = "GET") -> bytes:
    return f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n{extra}\r\n".encode()


def _path(body: bytes) -> str:
    return json.loads(body)["path"]


@WAYS
def test_an_interim_answer_is_skipped_and_the_final_one_goes_to_its_own_caller(served, extra):
    url, lane, _, _ = served
    warm(url)
    before = lane.taken
    # were the 103 taken for the answer, the connection went back to the pool with the real answer to come, and the
    # next request on it (the newest there) got that answer
    with _send(url, "/serve/echo/early-hints?s=0.8&who=a", extra) as first:
        time.sleep(0.3)
        with _send(url, "/serve/echo/whoami?who=b", extra) as second:
            status, _, body, rest = read_answer(second)
            assert (status, _path(body), rest) == (200, "/whoami?who=b", b"")
        status, _, body, rest = read_answer(first)
        assert (status, _path(body), rest) == (200, "/early-hints?s=0.8&who=a", b"")
    assert lane.taken == before + (0 if extra else 2)


@WAYS
def test_a_second_message_behind_an_answer_is_a_502_and_answers_no_later_request(served, extra):
    url, lane, _, _ = served
    warm(url)
    before = lane.taken
    # passed on, the second message would be read by the caller as the answer to its next request on the connection
    with _send(url, "/serve/echo/extra", extra) as conn:
        status, head, body, rest = read_answer(conn)
        assert (status, rest) == (502, b""), head + body
        assert b"more than its answer" in body and more_within(conn, 0.5) == b""
        conn.sendall(_request("/api/v1/whoami"))
        status, _, body, rest = read_answer(conn)
        assert (status, rest) == (200, b"") and json.loads(body)["admin"] is True
    assert lane.taken == before + (0 if extra else 1)


@WAYS
def test_a_body_behind_an_answer_to_head_is_not_passed_on(served, extra):
    url, lane, _, _ = served
    warm(url)
    before = lane.taken
    with _send(url, "/serve/echo/head-body", extra, method="HEAD") as conn:
        status, head, body, rest = read_answer(conn, head_only=True)
        assert (status, rest) == (200, b"") and b"\r\ncontent-length: 8" in head
        assert more_within(conn, 0.5) == b""
        conn.sendall(_request("/serve/echo/whoami?after=head", extra))
        status, _, body, rest = read_answer(conn)
        assert (status, _path(body), rest) == (200, "/whoami?after=head", b"")
    assert lane.taken == before + (0 if extra else 2)


@WAYS
@pytest.mark.parametrize("framing", ["", "?length=1"], ids=["chunked", "with a length"])
def test_a_streamed_answer_the_replica_breaks_off_closes_the_callers_connection(served, extra, framing):
    url, lane, _, _ = served
    warm(url)
    before = lane.taken
    with _send(url, "/serve/echo/break-stream" + framing, extra) as conn:
        got = b""
        end = time.monotonic() + 10
        while time.monotonic() < end and (chunk := more_within(conn, 0.5)) is not None:
            got += chunk
        assert time.monotonic() < end, f"the connection is still open: {got[:200]!r}"  # not told the answer broke
    assert got.startswith(b"HTTP/1.1 200 OK\r\n")
    assert lane.taken == before + (0 if extra else 1)
