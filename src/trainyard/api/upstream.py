"""The ``/serve/`` proxy's hop to a replica: HTTP/1.1 over kept-alive asyncio connections, answers parsed by
httptools (the parser uvicorn already runs this server on).

Why not httpx: its AsyncClient cost this server about 2.7 ms of CPU per small request where this costs
about 0.1 ms (aiohttp's client 0.45 ms), against 0.5 ms of work in a small replica (bench/RESULTS.md,
"the /serve proxy without httpx"). It does only what the hop needs: plain HTTP to ``HOST:PORT``, no TLS,
redirects, cookies or decompression; bodies pass as they come.

Kept-alive connections wait per replica (newest first) for at most :data:`IDLE` seconds, less than
uvicorn's 5 s keep-alive, so a replica seldom closes one just as it is reused. When a connection turns out
closed before any byte of an answer came back, an idempotent request with a replayable body is sent once more
on a new connection (a reused one), or raises :class:`NoAnswer` so that the caller may send it to another
replica (a new one: nginx's ``proxy_next_upstream error``); anything else is :class:`UpstreamBroken`.
"""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterable, AsyncIterator, Protocol

import httptools

from trainyard.api.bounded_http import MAX_HEAD

CONNECT_TIMEOUT = 5.0  # seconds to open a connection to a replica
READ_TIMEOUT = 300.0  # seconds a replica may stay silent while it owes an answer
IDLE = 4.0  # seconds a connection may wait for reuse (uvicorn closes idle ones after 5)
MAX_IDLE = 100  # connections kept per replica; more are closed when freed
READ_SIZE = 1 << 16
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"PUT", b"DELETE", b"TRACE"})

Headers = list[tuple[bytes, bytes]]


class UpstreamError(Exception):
    """The replica could not be reached or did not answer in HTTP."""


class ConnectFailed(UpstreamError):
    """No connection to the replica (refused, unreachable, timed out): nothing reached it."""


class UpstreamBroken(UpstreamError):
    """The connection broke, timed out or carried something that is not an HTTP answer."""


class NoAnswer(UpstreamBroken):
    """A new connection closed before any byte of an answer to an idempotent request whose body can be sent
    again: the replica may be on its way out, and another may take the request."""


class _Parsed:
    """httptools' callbacks for one answer."""

    __slots__ = ("headers", "body", "buffered", "headers_done", "done", "messages", "head_seen")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.headers: Headers = []
        self.body: list[bytes] = []
        self.buffered = 0  # bytes in body
        self.headers_done = False
        self.done = False
        self.messages = 0
        self.head_seen = 0  # bytes read before the head was whole (of reads that did not end it)

    def on_message_begin(self) -> None:
        self.messages += 1

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)

    def on_message_complete(self) -> None:
        self.done = True


class Listener(Protocol):
    """Told, from the connection's own callbacks, that more of the answer arrived or the connection ended."""

    def heard(self) -> None: ...


class Connection(asyncio.Protocol):
    """One connection to a replica; what arrives goes straight into the current answer's parser."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.since = 0.0  # when it was last freed
        self.transport: asyncio.Transport | None = None
        self.parser: httptools.HttpResponseParser | None = None  # of the answer owed now
        self.parsed: _Parsed | None = None
        self.error: UpstreamBroken | None = None
        self.ended = False  # the replica closed its side (or the connection is gone)
        self._waiter: asyncio.Future | None = None
        self._writable: asyncio.Future | None = None
        self.listener: Listener | None = None  # told of what arrives instead of a waiting task (api/serve_express.py)
        self.spare: tuple[httptools.HttpResponseParser, _Parsed] | None = None  # the last answer's, clean

    def expect_answer(self) -> _Parsed:
        """Make the parser of the answer owed next ready (the last one's again when it ended cleanly: llhttp reads
        one message after another on a kept-alive connection, and a new parser costs more than the answer's own
        parse)."""
        if self.spare is not None:
            (self.parser, parsed), self.spare = self.spare, None
            parsed.reset()
        else:
            parsed = _Parsed()
            self.parser = httptools.HttpResponseParser(parsed)
        self.parsed = parsed
        return parsed

    # -- asyncio's side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.parser is None:  # nothing asked: the connection is not safe to reuse
            self.error = UpstreamBroken("the replica sent bytes no request asked for")
            self.transport.close()  # type: ignore[union-attr]
        else:
            try:
                self.parser.feed_data(data)
            except (httptools.HttpParserError, httptools.HttpParserUpgrade) as e:
                self.error = UpstreamBroken(f"the replica's answer is not valid HTTP/1.1: {e}")
                self.transport.close()  # type: ignore[union-attr]
            parsed = self.parsed
            if not parsed.headers_done:  # a replica's head is bounded as a caller's is (api/bounded_http.py)
                parsed.head_seen += len(data)
                if parsed.head_seen > MAX_HEAD and self.error is None:
                    self.error = UpstreamBroken(f"the replica's answer head is over {MAX_HEAD >> 10} KiB")
                    self.transport.close()  # type: ignore[union-attr]
            if self.parsed.buffered > READ_SIZE * 16:  # type: ignore[union-attr]  # the caller reads slower
                self.transport.pause_reading()  # type: ignore[union-attr]
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self._wake()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    def _wake(self) -> None:
        if self.listener is not None:
            self.listener.heard()
            return
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- the pool's side
    def usable(self, now: float) -> bool:
        return now - self.since < IDLE and not self.ended and self.error is None and not self.transport.is_closing()  # type: ignore[union-attr]

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def drain(self) -> None:
        if self._writable is not None:
            await self._writable
        if self.ended:
            raise UpstreamBroken("the replica closed the connection while the request was sent")

    async def wait(self) -> None:
        """Until more of the answer arrived, the replica closed its side or READ_TIMEOUT passed."""
        if self.error is not None:
            raise self.error
        if self.ended:
            return
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        if not self.transport.is_reading() and not self.transport.is_closing():  # type: ignore[union-attr]
            self.transport.resume_reading()  # type: ignore[union-attr]
        timer = loop.call_later(READ_TIMEOUT, _time_out, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
        if self.error is not None:
            raise self.error


def _time_out(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_exception(UpstreamBroken(f"the replica sent nothing for {READ_TIMEOUT:g}s"))


class Response:
    """An answer whose head has arrived; its body is read with :meth:`read` or :meth:`chunks`, and
    :meth:`release` must follow (it keeps the connection for the next request when the answer ended cleanly)."""

    __slots__ = ("status", "headers", "length", "_conn", "_parser", "_parsed", "_to_close", "_pool", "_keep",
                 "_head_only")

    def __init__(self, pool: "UpstreamPool", conn: Connection, parser: httptools.HttpResponseParser,
                 parsed: _Parsed, head_only: bool) -> None:
        self._pool, self._conn, self._parser, self._parsed = pool, conn, parser, parsed
        self.status: int = parser.get_status_code()
        self.headers = parsed.headers
        self.length: int | None = None
        chunked = False
        # llhttp's should_keep_alive() reads False once the message is over: decided here instead
        self._keep = parser.get_http_version() == "1.1"
        for name, value in parsed.headers:
            if name == b"content-length" and value.strip().isdigit():
                self.length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                self._keep = b"close" not in value.lower() and (self._keep or b"keep-alive" in value.lower())
        self._head_only = head_only
        if head_only:  # llhttp is not told: the parser waits for a body, and is not used again
            parsed.done = True
        # no length and not chunked: the body runs until the replica closes the connection (RFC 9112 §6.3)
        self._to_close = not parsed.done and self.length is None and not chunked

    async def chunks(self) -> AsyncIterator[bytes]:
        parsed = self._parsed
        while True:
            if parsed.body:
                body, parsed.body, parsed.buffered = parsed.body, [], 0
                yield body[0] if len(body) == 1 else b"".join(body)
            if parsed.done:
                return
            conn = self._conn
            if conn.ended:
                if self._to_close:
                    parsed.done = True
                    continue
                raise UpstreamBroken("the replica closed the connection in the middle of its answer")
            await conn.wait()

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    def abort(self) -> None:
        """Break off the answer (the caller left): the connection is closed, a pending read ends."""
        self._conn.close()

    def release(self) -> None:
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is None:
            return
        parsed = self._parsed
        conn.parser = None
        if parsed.done and self._keep and not self._to_close and parsed.messages == 1 and conn.error is None:
            if not self._head_only:
                conn.spare = (self._parser, parsed)
            self._pool.free(conn)
        else:
            conn.close()


class UpstreamPool:
    """Kept-alive connections to replicas, by ``HOST:PORT``; one per request in flight."""

    def __init__(self) -> None:
        self._idle: dict[str, list[Connection]] = {}
        self._closed = False

    async def request(self, address: str, method: bytes, target: bytes, headers: Headers,
                      body: bytes | AsyncIterable[bytes] | None, length: int | None = None) -> Response:
        """Send ``method target`` with ``headers`` (without framing headers: this adds them) to
        ``HOST:PORT`` and wait for the answer's head. ``body``: bytes, or chunks with their total ``length``
        if known (else sent chunked). Raises :class:`ConnectFailed` when nothing reached the replica."""
        head = request_head(method, target, address, headers, body, length)
        retry = method in IDEMPOTENT and not _streamed(body)
        conn, reused = await self._acquire(address)
        while True:
            parsed = conn.expect_answer()
            try:
                await _send(conn, head, body, chunked=_streamed(body) and length is None)
                while not parsed.headers_done:
                    if conn.ended:
                        raise UpstreamBroken("the replica closed the connection without an answer")
                    await conn.wait()
                return Response(self, conn, conn.parser, parsed, head_only=method == b"HEAD")
            except (UpstreamBroken, OSError) as e:
                conn.close()
                # closed (or reset) before a byte of the answer, not silent and not garbled: safe to send again
                unanswered = (retry and parsed.messages == 0 and conn.error is None
                              and (conn.ended or isinstance(e, OSError)))
                if unanswered and not reused:
                    raise NoAnswer(_why(e)) from None
                if not unanswered:
                    raise e if isinstance(e, UpstreamBroken) else UpstreamBroken(_why(e)) from None
                # a kept-alive connection the replica had closed: the request never reached it
                conn, reused = await self._connect(address), False
            except BaseException:
                conn.close()
                raise

    def idle(self, address: str) -> Connection | None:
        """A kept-alive connection to ``address`` that waits for reuse, taken from the pool; None if none."""
        idle = self._idle.get(address)
        if idle:
            now = time.monotonic()
            while idle:
                conn = idle.pop()
                if conn.usable(now):
                    return conn
                conn.close()
        return None

    def send_now(self, address: str, method: bytes, target: bytes, headers: Headers,
                 body: bytes | None) -> Connection | None:
        """Send a request with a whole body (or none) at once on a connection to ``address`` that waits for
        reuse, its answer's parser made ready (``conn.parsed``); None, with nothing sent, if none waits. The
        caller sets the connection's ``listener`` before the loop runs again, and calls :meth:`Response.release`
        (or closes the connection) when done."""
        conn = self.idle(address)
        if conn is None:
            return None
        conn.expect_answer()
        conn.transport.write(request_head(method, target, address, headers, body, None) + (body or b""))  # type: ignore[union-attr]
        return conn

    async def _acquire(self, address: str) -> tuple[Connection, bool]:
        conn = self.idle(address)
        return (conn, True) if conn is not None else (await self._connect(address), False)

    async def _connect(self, address: str) -> Connection:
        host, _, port = address.rpartition(":")
        conn = Connection(address)
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                await asyncio.get_running_loop().create_connection(lambda: conn, host.strip("[]"), int(port))
        except (OSError, TimeoutError, ValueError) as e:
            raise ConnectFailed(_why(e)) from None
        return conn

    def free(self, conn: Connection) -> None:
        idle = self._idle.setdefault(conn.address, [])
        if self._closed or len(idle) >= MAX_IDLE:
            conn.close()
            return
        if not conn.transport.is_reading():  # type: ignore[union-attr]  # paused under a large answer
            conn.transport.resume_reading()  # type: ignore[union-attr]  # so it hears the replica close it
        conn.since = time.monotonic()
        idle.append(conn)

    async def close(self) -> None:
        """Close the waiting connections; those in use close when freed."""
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()


def request_head(method: bytes, target: bytes, address: str, headers: Headers,
                 body: bytes | AsyncIterable[bytes] | None, length: int | None) -> bytes:
    lines = [method, b" ", target, b" HTTP/1.1\r\nhost: ", address.encode("latin-1"), b"\r\n"]
    for name, value in headers:
        lines += (name, b": ", value, b"\r\n")
    if isinstance(body, bytes):
        lines += (b"content-length: ", str(len(body)).encode(), b"\r\n")
    elif body is not None:
        lines.append(b"transfer-encoding: chunked\r\n" if length is None else b"content-length: %d\r\n" % length)
    lines.append(b"\r\n")
    return b"".join(lines)


def _streamed(body: object) -> bool:
    return body is not None and not isinstance(body, bytes)


async def _send(conn: Connection, head: bytes, body: bytes | AsyncIterable[bytes] | None, chunked: bool) -> None:
    transport = conn.transport
    if conn.ended or transport.is_closing():  # type: ignore[union-attr]
        raise UpstreamBroken("the replica closed the connection")
    if body is None or isinstance(body, bytes):
        transport.write(head + body if body else head)  # type: ignore[union-attr]
        return
    transport.write(head)  # type: ignore[union-attr]
    async for chunk in body:
        if chunk:
            transport.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)  # type: ignore[union-attr]
            await conn.drain()
    if chunked:
        transport.write(b"0\r\n\r\n")  # type: ignore[union-attr]
    await conn.drain()


def _why(e: BaseException) -> str:
    return str(e) or type(e).__name__
