"""One kept-alive HTTP/1.1 connection for the SDK's JSON requests on a job's path (submit, wait).

Why: httpx spent ~0.3 ms of CPU per request on an idle machine (its URL parsed three times, h11's
state machine, its request and response models) and ~0.7 ms cold, on the path of every job; the
standard library's ``http.client`` still ~0.4 ms cold, half of it parsing the answer's headers with
the email package (bench/RESULTS.md, session 11). Here, a request is one ``sendall`` and an answer
is read for its status, length and connection alone.

Only where httpx would do nothing more: plain ``http://`` to this machine (the local server; where
a round trip crosses a network, it is not the client's CPU that counts, and a connection that hangs
is httpx's to time out and follow), no transport handed in (tests talk to an app in-process through
one), no proxy named in the environment (httpx honours ``*_PROXY``). A
request that may go again (nothing sent yet, or an idempotent one) and fails here is answered
``None``, for :class:`trainyard.sdk.http.Http` to send through httpx, which follows the leader and
names the failure as before; a POST that fails after it was sent, or any request that timed out
waiting for its answer, is the same :class:`~trainyard.errors.ServerUnavailable` that httpx's path
raises for it (:func:`trainyard.sdk.http.may_resend`: never sent twice).
"""

from __future__ import annotations

import ipaddress
import os
import re
import select
import socket
import threading
from urllib.parse import urlsplit

from trainyard import errors

_PROXY_VARS = ("http_proxy", "all_proxy")


def plain_http_for(url: str) -> bool:
    """Whether requests to ``url`` may go through :class:`PlainConnection` (see the module's doc)."""
    parts = urlsplit(url)
    names = {k.lower() for k in os.environ}
    return parts.scheme == "http" and _loopback(parts.hostname or "") and not any(v in names for v in _PROXY_VARS)


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class PlainConnection:
    """Requests to one ``http://host:port``, one at a time (another thread's goes through httpx)."""

    def __init__(self, server: str, timeout: float) -> None:
        parts = urlsplit(server)
        self.server = server
        self._address = (parts.hostname or "", parts.port or 80)
        self._host = parts.netloc.rpartition("@")[2]  # as httpx sends Host: with the port, without credentials
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._pid = 0  # the process that made the connection
        self._reader: AnswerReader | None = None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = self._reader = None

    def call(self, method: str, target: str, body: bytes | None, headers: dict[str, str], *, idempotent: bool,
             timeout: float | None = None) -> tuple[int, bytes] | None:
        """``(status, body)`` of the answer; None where httpx should send it instead (see the module's doc).
        ``target``: the path (only characters a URL path may hold as they are: httpx quotes the others)
        and its query, already encoded; ``idempotent``: whether the request may go again once it may
        have reached the server."""
        if not _PLAIN_TARGET.fullmatch(target) or not self._lock.acquire(blocking=False):
            return None
        try:
            try:
                sock = self._ready(timeout or self._timeout)
            except OSError:
                self.close()
                return None  # no connection: nothing was sent
            lines = [f"{method} {self._prefix}{target} HTTP/1.1", f"Host: {self._host}", "Accept: */*",
                     *(f"{k}: {v}" for k, v in headers.items())]
            if body is not None or method in _WITH_BODY:
                lines.append(f"Content-Length: {len(body or b'')}")
            try:
                sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (body or b""))
                status, data, close = self._reader.answer(head=method == "HEAD")  # type: ignore[union-attr]
            except (OSError, ValueError) as e:
                self.close()
                if idempotent and not isinstance(e, TimeoutError):  # a slow server is not a gone one
                    return None
                raise errors.ServerUnavailable(f"cannot reach the trainyard server at {self.server}: {e}") from None
            except BaseException:  # Ctrl-C in a long poll: what is left of its answer must not be the next one's
                self.close()
                raise
            if close:
                self.close()
            return status, data
        finally:
            self._lock.release()

    def _ready(self, timeout: float) -> socket.socket:
        """A connection to send on: the kept one unless the server closed it while idle (readable
        means it sent its EOF: httpcore drops such a connection the same way) or this process is a
        fork of the one that made it, else a new one."""
        if self._sock is not None and (self._pid != os.getpid() or select.select([self._sock], [], [], 0)[0]):
            self.close()  # a forked child's copy of the socket is its parent's connection: never shared
        if self._sock is None:
            self._sock = socket.create_connection(self._address, timeout)
            self._pid = os.getpid()
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._reader = AnswerReader(self._sock)
        else:
            self._sock.settimeout(timeout)
        return self._sock


_PLAIN_TARGET = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*(\?[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?")
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
_MAX_HEAD = 64 << 10


class AnswerReader:
    """One HTTP/1.1 answer at a time off a socket: its status, body (by Content-Length, chunked, or up
    to the close) and whether the connection ends with it. Its headers are read for these alone:
    http.client parses them with the email package, ~0.2 ms of CPU per answer on this path."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = b""

    def answer(self, head: bool = False) -> tuple[int, bytes, bool]:
        while True:
            version, status, fields = self._head()
            if not 100 <= status < 200:  # an interim answer (100 Continue) comes before the real one
                break
        close = "close" in fields.get("connection", "").lower() or \
            (version == "HTTP/1.0" and "keep-alive" not in fields.get("connection", "").lower())
        if head or status in (204, 304):
            return status, b"", close
        if "chunked" in fields.get("transfer-encoding", "").lower():
            return status, self._chunked(), close
        if "content-length" in fields:
            return status, self._exactly(int(fields["content-length"])), close
        while chunk := self._sock.recv(65536):  # no length: the body ends with the connection
            self._buf += chunk
        data, self._buf = self._buf, b""
        return status, data, True

    def _head(self) -> tuple[str, int, dict[str, str]]:
        text = self._until(b"\r\n\r\n").decode("latin-1")
        status_line, *lines = text.split("\r\n")
        version, code, *_ = status_line.split(" ", 2)
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise ValueError(f"not an HTTP/1.x answer: {status_line[:100]!r}")
        fields: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        return version, int(code), fields

    def _until(self, mark: bytes) -> bytes:
        """The bytes before ``mark`` (taken off, with it)."""
        while (end := self._buf.find(mark)) < 0:
            if len(self._buf) > _MAX_HEAD:
                raise ValueError("an answer's head or chunk line is too long")
            self._fill()
        found, self._buf = self._buf[:end], self._buf[end + len(mark):]
        return found

    def _exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        found, self._buf = self._buf[:n], self._buf[n:]
        return found

    def _chunked(self) -> bytes:
        parts = []
        while size := int(self._until(b"\r\n").split(b";")[0], 16):
            parts.append(self._exactly(size))
            self._exactly(2)  # the chunk's CRLF
        while self._until(b"\r\n"):  # trailer fields, up to the empty line
            pass
        return b"".join(parts)

    def _fill(self) -> None:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection before its answer ended")
        self._buf += chunk
