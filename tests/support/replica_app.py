"""A tiny HTTP server to run as a service replica in tests: stdlib only, but for its WebSocket (the
``websockets`` library's sans-I/O protocol, driven over the handler's socket).

Listens on $TRAINYARD_SERVICE_PORT (or argv[1]). Answers ``/healthz`` (200, once
$READY_AFTER seconds have passed), ``/whoami`` (pid, version, the path and
headers it saw), ``/slow?s=SECONDS``, ``/stream?n=N`` (N chunks of 64 KiB, sent chunked: byte i of
chunk k is k), ``/big?n=BYTES`` (that many bytes with a content-length), ``POST /echo`` (the body back,
sent with a length or chunked), ``/crash`` (exits at once, without answering), ``/drop-next`` (answers,
then closes its kept-alive connection on the next request without answering: a replica that dropped it),
``/seen`` (the request lines it has read, oldest first: a request smuggled past the proxy shows there),
``/hang-up`` (answers, then closes every connection at its next request but ``/healthz`` without answering: a
replica on its way out), ``/ws`` (a WebSocket echoing each message; the text ``close CODE`` closes it with
that code; subprotocol ``echo.v1`` when asked), ``/ws-refused`` (refuses the upgrade with its own 403, a
header and a JSON body) and ``/ws-closed`` (the close code and reason it last received), ``/cookies`` (sets this server's sign-in cookie and one
of its own, and allows a service worker over ``/``).

With ``CHECK_TOKEN=1`` it answers every request (``/healthz`` too) only with the replica's own
``X-Trainyard-Service-Token`` ($TRAINYARD_SERVICE_TOKEN), else 403: a user's service as README shows.

Replicas that break HTTP's rules on the hop: ``/early-hints?s=SECONDS`` (a ``103 Early Hints``, then /whoami's
answer that many seconds later), ``/extra`` (a 5-byte answer and, in the same write, a second message nothing
asked for: an answer for whatever the caller asks next), ``HEAD /head-body`` (its answer with the body a GET
would get, in one write), ``/break-stream?length=1`` (a streamed answer, chunked or with a content-length,
broken off half-way: the connection closed).
"""

import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

STARTED = time.monotonic()
READY_AFTER = float(os.environ.get("READY_AFTER", "0"))
VERSION = os.environ.get("APP_VERSION", "1")
LAST_CLOSE: dict = {}
HUNG_UP: list[bool] = []  # /hang-up was asked
SEEN: list[str] = []  # the request line of each request read
CHECK_TOKEN = os.environ.get("CHECK_TOKEN") == "1"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _who(self) -> dict:
        return {"pid": os.getpid(), "version": VERSION, "path": self.path, "headers": dict(self.headers.items())}

    def parse_request(self) -> bool:
        SEEN.append(self.raw_requestline.decode("latin-1").rstrip("\r\n"))
        return super().parse_request()

    def _dropped(self) -> bool:
        """The connection of an earlier /drop-next, or any after /hang-up: closed, this request unanswered."""
        path = urlsplit(self.path).path
        if getattr(self, "drop", False) or (HUNG_UP and path != "/healthz"):
            self.close_connection = True
            return True
        self.drop = path == "/drop-next"
        if path == "/hang-up":
            HUNG_UP.append(True)
        return False

    def _refused(self) -> bool:
        """With CHECK_TOKEN: a request without the replica's token, answered 403."""
        if not CHECK_TOKEN or hmac.compare_digest(self.headers.get("X-Trainyard-Service-Token", ""),
                                                  os.environ["TRAINYARD_SERVICE_TOKEN"]):
            return False
        self._send(403, {"refused": "no service token"})
        return True

    def do_GET(self) -> None:  # noqa: N802
        if self._dropped() or self._refused():
            return None
        url = urlsplit(self.path)
        if url.path == "/big":
            data = b"b" * int(parse_qs(url.query)["n"][0])
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return None
        if url.path == "/cookies":  # a service that would sign its visitors in as its owner, and widen a worker
            self.send_response(200)
            self.send_header("Set-Cookie", "trainyard_serve=OWNERS; Path=/serve/; HttpOnly")
            self.send_header("Set-Cookie", "session=abc; Path=/serve/echo/")
            self.send_header("Service-Worker-Allowed", "/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if url.path == "/healthz":
            ready = time.monotonic() - STARTED >= READY_AFTER
            return self._send(200 if ready else 503, {"ready": ready})
        if url.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            return self._websocket()
        if url.path == "/ws-refused":
            self.send_response(403)
            self.send_header("X-Refused-By", "replica")
            body = json.dumps({"refused": "no upgrade here", "upgrade": self.headers.get("Upgrade", "")}).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return None
        if url.path == "/ws-closed":
            return self._send(200, LAST_CLOSE)
        if url.path == "/seen":
            return self._send(200, {"seen": SEEN})
        if url.path == "/crash":
            os._exit(3)
        if url.path == "/stream":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for k in range(int(parse_qs(url.query)["n"][0])):
                self.wfile.write(b"10000\r\n" + bytes([k % 256]) * 0x10000 + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return None
        if url.path == "/extra":
            inner = b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 8\r\n\r\nINJECTED"
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nAAAAA" + inner)
            return None
        if url.path == "/break-stream":
            self.close_connection = True
            framing = b"content-length: 2000000" if parse_qs(url.query).get("length") else b"transfer-encoding: chunked"
            self.wfile.write(b"HTTP/1.1 200 OK\r\n%s\r\n\r\n" % framing)
            self.wfile.flush()
            time.sleep(0.2)  # the head and what follows apart: the answer is streamed as it comes
            self.wfile.write(b"5\r\nhello\r\n" if b"chunked" in framing else b"x" * 1000)
            return None
        if url.path == "/early-hints":
            self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
            self.wfile.flush()
            time.sleep(float(parse_qs(url.query).get("s", ["0.5"])[0]))
            return self._send(200, self._who())
        if url.path == "/slow":
            time.sleep(float(parse_qs(url.query).get("s", ["0.1"])[0]))
        return self._send(200, self._who())

    def do_HEAD(self) -> None:  # noqa: N802
        if urlsplit(self.path).path != "/head-body":
            return self.send_error(501, f"Unsupported method ({self.command!r})")  # as without do_HEAD
        self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nINJECTED")
        return None

    def _websocket(self) -> None:
        from websockets.frames import Opcode
        from websockets.server import ServerProtocol

        ws = ServerProtocol(select_subprotocol=lambda _, offered: "echo.v1" if "echo.v1" in offered else None)
        # the handler read the request's head already: the protocol is given it again as it came
        ws.receive_data("".join([self.requestline, "\r\n", *(f"{k}: {v}\r\n" for k, v in self.headers.items()),
                                 "\r\n"]).encode("latin-1"))
        ws.send_response(ws.accept(ws.events_received()[0]))
        self.close_connection = True
        while True:
            outs = ws.data_to_send()
            for out in outs:
                self.wfile.write(out)
            self.wfile.flush()
            if b"" in outs:  # the protocol's end: the handler closes the socket
                return
            data = self.rfile.read1(1 << 16)
            ws.receive_data(data) if data else ws.receive_eof()
            for frame in ws.events_received():
                if frame.opcode == Opcode.TEXT and frame.data.startswith(b"close "):
                    ws.send_close(int(frame.data.split()[1]), "asked to")
                elif frame.opcode == Opcode.TEXT:
                    ws.send_text(frame.data)
                elif frame.opcode == Opcode.BINARY:
                    ws.send_binary(frame.data)
            if ws.close_rcvd is not None:
                LAST_CLOSE.update(code=ws.close_rcvd.code, reason=ws.close_rcvd.reason)
            if not data:
                return

    def _chunked(self) -> bytes:
        parts = []
        while size := int(self.rfile.readline().split(b";")[0], 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        self.rfile.readline()  # the empty trailer
        return b"".join(parts)

    def do_POST(self) -> None:  # noqa: N802
        if self._dropped() or self._refused():
            return None
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = self._chunked()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        return self._send(200, {**self._who(), "body": body.decode()})

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    port = int(sys.argv[1] if len(sys.argv) > 1 else os.environ["TRAINYARD_SERVICE_PORT"])
    ThreadingHTTPServer.daemon_threads = True
    print(f"replica {os.getpid()} version {VERSION} on {port}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
