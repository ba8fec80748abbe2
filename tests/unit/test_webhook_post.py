"""A webhook's POST ends within its timeout whatever the receiver does: one that trickles its answer a byte at a
time (each read within httpx's per-read timeout) is given up at the deadline; of a refusal with an endless body
only its first bytes are read."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tests.support.stub_http import Unanswering
from trainyard.services import webhook_loop


def post(url: str, body: dict, timeout: float) -> str | None:
    """As the loop sends: from a sender thread (this one may run a loop of its own: Playwright's, in a session
    that opened a browser)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(webhook_loop.post, url, body, timeout).result()


def test_a_receiver_that_trickles_its_answer_is_given_up_at_the_timeout():
    srv = Unanswering(hold=True, trickle=True)
    try:
        t0 = time.monotonic()
        error = post(srv.url + "/hook", {"event": "job.failed"}, 1.0)
        took = time.monotonic() - t0
    finally:
        srv.sock.close()
    assert error == "TimeoutError: no whole answer within 1 s"
    assert took < 3


def test_a_refusal_with_an_endless_body_is_told_by_its_first_bytes_without_waiting_for_the_rest():
    sock = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        conn, _ = sock.accept()
        held.append(conn)
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1000000000\r\n\r\n" + b"no! " * 100)

    threading.Thread(target=serve, daemon=True).start()
    try:
        t0 = time.monotonic()
        error = post(f"http://127.0.0.1:{sock.getsockname()[1]}/hook", {"event": "job.failed"}, 5.0)
        took = time.monotonic() - t0
    finally:
        sock.close()
    assert error == "HTTP 500: " + ("no! " * 50)
    assert took < 4
