"""The ``/serve/`` hop's connections to replicas: one asyncio protocol per kept-alive connection, each answer
parsed by httptools as it arrives (:mod:`trainyard.api.upstream` pools them and reads answers from them)."""

from __future__ import annotations

import asyncio
from typing import Protocol

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
    """httptools' callbacks for one answer: its final one (``status`` 200 or more). An interim answer before it
    (``100 Continue``, ``103 Early Hints``) is skipped: taken for the answer, it ended the request early, and the
    connection went back to the pool with the real answer still to come, which the next request on it then got."""

    __slots__ = ("parser", "status", "headers", "body", "buffered", "headers_done", "done", "messages", "head_seen")

    def __init__(self) -> None:
        self.parser: httptools.HttpResponseParser | None = None  # the parser calling these (set by its maker)
        self.status = 0  # read once headers_done
        self.reset()

    def reset(self) -> None:
        self.headers: Headers = []
        self.body: list[bytes] = []
        self.buffered = 0  # bytes in body
        self.headers_done = False  # of the final answer
        self.done = False
        self.messages = 0  # interim ones too: the request reached the replica once any began
        self.head_seen = 0  # bytes read before the head was whole (of reads that did not end it)

    def on_message_begin(self) -> None:
        if self.done:  # it would answer a request not sent yet (the caller's next one, even one no replica gets)
            raise UpstreamBroken("the replica sent more than its answer")
        self.messages += 1

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()  # type: ignore[union-attr]
        self.headers_done = self.status >= 200

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)

    def on_message_complete(self) -> None:
        if self.headers_done:
            self.done = True
        else:  # an interim answer ended: nothing of it is kept, the final one follows
            self.headers, self.body, self.buffered = [], [], 0


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
            self.parser = parsed.parser = httptools.HttpResponseParser(parsed)
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
                cause = e.__context__  # what a callback raised
                self.error = cause if isinstance(cause, UpstreamBroken) else UpstreamBroken(
                    f"the replica's answer is not valid HTTP/1.1: {e}")
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
