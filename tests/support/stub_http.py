"""Small HTTP servers on 127.0.0.1 for the SDK's client tests: real sockets, scripted answers."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, NamedTuple


class Request(NamedTuple):
    method: str
    path: str
    port: int  # the client's: tells one connection from another
    headers: dict[str, str]
    body: bytes


def send_json(handler: BaseHTTPRequestHandler, status: int, data: Any) -> None:
    """Answer ``handler``'s request with ``data`` as JSON, its length said."""
    raw = json.dumps(data).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(raw)))
    handler.end_headers()
    handler.wfile.write(raw)


class JsonServer:
    """Records each request as ``record(Request)`` in :attr:`got` and answers ``answer(method, path)``:
    ``(status, data)`` as JSON, or None to drop the connection unanswered. ``keep_alive``: HTTP/1.1 with
    kept connections (else HTTP/1.0, one request each); ``close_after``: each connection closed after its
    answer without saying so first, as a server closes an idle kept-alive one."""

    def __init__(self, answer: Callable[[str, str], tuple[int, Any] | None], record: Callable[[Request], Any],
                 *, keep_alive: bool = True, close_after: bool = False) -> None:
        self.got: list = []
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                got.append(record(Request(self.command, self.path, self.client_address[1], dict(self.headers), body)))
                answered = answer(self.command, self.path)
                if answered is None:
                    self.close_connection = True
                    return
                send_json(self, *answered)
                self.close_connection = close_after

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Unanswering:
    """Reads each request's head and counts it in :attr:`requests`, never answering: ``hold`` keeps the
    connection open (a server that is slow), else it is closed at once (a server killed mid-request); ``trickle``
    (with ``hold``) sends a status line, then one byte of a header every 0.2 s for as long as it is read."""

    def __init__(self, hold: bool, trickle: bool = False) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests = 0
        self.held: list[socket.socket] = []
        self._hold = hold
        self._trickle = trickle
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            self.requests += 1
            if self._hold:
                self.held.append(conn)
                if self._trickle:
                    threading.Thread(target=self._drip, args=(conn,), daemon=True).start()
            else:
                conn.close()

    @staticmethod
    def _drip(conn: socket.socket) -> None:
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            while True:
                time.sleep(0.2)
                conn.sendall(b"a")
        except OSError:
            return
