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

import os
import re
import select
import socket
import threading
from urllib.parse import urlsplit

import httptools

from trainyard.sdk.scheme import unreachable

_PROXY_VARS = ("http_proxy", "all_proxy")


def plain_http_for(url: str) -> bool:
    """Whether requests to ``url`` may go through :class:`PlainConnection` (see the module's doc)."""
    parts = urlsplit(url)
    names = {k.lower() for k in os.environ}
    return parts.scheme == "http" and _loopback(parts.hostname or "") and not any(v in names for v in _PROXY_VARS)


def _loopback(host: str) -> bool:
    if host in ("localhost", "127.0.0.1", "::1"):  # the addresses servers announce: no ipaddress to load
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
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
                raise unreachable(self.server, e) from None
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


class _Parsed:
    """httptools' callbacks for the answers on one connection, one at a time."""

    __slots__ = ("parser", "fields", "body", "status", "done")

    def __init__(self) -> None:
        self.parser: httptools.HttpResponseParser | None = None
        self.on_message_begin()

    def on_message_begin(self) -> None:
        self.fields: dict[bytes, bytes] = {}
        self.body: list[bytes] = []
        self.status = 0  # set once the head is whole
        self.done = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields[name.lower()] = value

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()  # type: ignore[union-attr]

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.done = not 100 <= self.status < 200  # an interim answer (100 Continue): the real one follows


class AnswerReader:
    """One HTTP/1.1 answer at a time off a socket, parsed by httptools (the parser the server itself runs
    on): its status, its body (by Content-Length, chunked, or up to the close) and whether the connection
    ends with it. Not http.client: it parses every answer's headers with the email package, ~0.2 ms of
    CPU per answer on this path."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._parsed = _Parsed()
        self._parser = self._parsed.parser = httptools.HttpResponseParser(self._parsed)
        self._eof = False

    def answer(self, head: bool = False) -> tuple[int, bytes, bool]:
        status = self._head()
        parsed = self._parsed
        fields = parsed.fields
        connection = fields.get(b"connection", b"").lower()
        close = b"close" in connection or (self._parser.get_http_version() == "1.0" and b"keep-alive" not in connection)
        # no length and not chunked: the body ends with the connection (RFC 9112 §6.3)
        to_close = b"content-length" not in fields and b"transfer-encoding" not in fields and status not in (204, 304)
        while not (head or parsed.done):
            if self._eof:
                if not to_close:
                    raise ConnectionError("the server closed the connection before its answer ended")
                break
            self._fill()
        data = b"".join(parsed.body)
        parsed.on_message_begin()
        # after a HEAD the parser still waits for the body its head announced: the connection goes with it
        return status, b"" if head else data, close or to_close or head

    def _head(self) -> int:
        """The status of the answer, once its head is whole (after any interim answer)."""
        read = 0
        while not self._parsed.status or 100 <= self._parsed.status < 200:
            if self._eof:
                raise ConnectionError("the server closed the connection before its answer ended")
            if read > _MAX_HEAD:
                raise ValueError("an answer's head is too long")
            read += self._fill()
        return self._parsed.status

    def _fill(self) -> int:
        chunk = self._sock.recv(65536)
        if not chunk:
            self._eof = True
            return 0
        try:
            self._parser.feed_data(chunk)
        except httptools.HttpParserError as e:
            raise ValueError(f"not an HTTP/1.1 answer: {e}") from None
        return len(chunk)
