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
from typing import AsyncIterable, AsyncIterator

import httptools

from trainyard.api.upstream_conn import (CONNECT_TIMEOUT, IDEMPOTENT, IDLE, MAX_IDLE, READ_SIZE, READ_TIMEOUT,
                                         ConnectFailed, Connection, Headers, NoAnswer, UpstreamBroken, UpstreamError,
                                         _Parsed)

__all__ = ["CONNECT_TIMEOUT", "IDEMPOTENT", "IDLE", "MAX_IDLE", "READ_SIZE", "READ_TIMEOUT", "ConnectFailed",
           "Connection", "Headers", "NoAnswer", "Response", "UpstreamBroken", "UpstreamError", "UpstreamPool",
           "request_head"]


class Response:
    """An answer whose head has arrived; its body is read with :meth:`read` or :meth:`chunks`, and
    :meth:`release` must follow (it keeps the connection for the next request when the answer ended cleanly).

    Only the answer's own bytes pass: anything the replica sends past its framing (a second message, a body
    after an answer to HEAD) is never read as part of it, and the connection is not reused; a second message
    that arrived before the answer was read makes it :class:`UpstreamBroken`."""

    __slots__ = ("status", "headers", "length", "head_only", "_conn", "_parser", "_parsed", "_to_close", "_pool",
                 "_keep")

    def __init__(self, pool: "UpstreamPool", conn: Connection, parser: httptools.HttpResponseParser,
                 parsed: _Parsed, head_only: bool) -> None:
        self._pool, self._conn, self._parser, self._parsed = pool, conn, parser, parsed
        self.status: int = parsed.status
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
        self.head_only = head_only
        if head_only:  # llhttp is not told: the parser waits for a body (never passed on), and is not used again
            parsed.done = True
        # no length and not chunked: the body runs until the replica closes the connection (RFC 9112 §6.3)
        self._to_close = not parsed.done and self.length is None and not chunked

    async def chunks(self) -> AsyncIterator[bytes]:
        parsed, conn = self._parsed, self._conn
        while True:
            if parsed.body and not self.head_only:
                body, parsed.body, parsed.buffered = parsed.body, [], 0
                yield body[0] if len(body) == 1 else b"".join(body)
                # while the caller passed that on, the rest of the answer and its end may have arrived: what
                # came is passed on before the end is (read as done first, the answer came out short)
                continue
            if parsed.done:
                if conn.error is not None:  # more than the answer came with it
                    raise conn.error
                return
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
        # one message, whole: a connection that carried an interim answer is not reused (rare, and none is left owed)
        if parsed.done and self._keep and not self._to_close and parsed.messages == 1 and conn.error is None:
            if not self.head_only:
                conn.spare = (self._parser, parsed)
            elif parsed.body:  # a body after an answer to HEAD: more may follow, to be read as the next answer
                conn.close()
                return
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
