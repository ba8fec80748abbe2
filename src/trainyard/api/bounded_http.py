"""uvicorn's httptools protocol with bounds on a request's head: its size and how long it may take to come.

uvicorn's httptools protocol keeps every byte of a request line and its headers until the head is whole, with no
limit (its h11 protocol stops at 16 KiB), and waits for a head for ever: one caller, signed in or not, could hold
a gigabyte of the server's memory per connection by never ending a header, or all its file descriptors with
connections that send nothing (slowloris). Here, as nginx, Go's net/http and Node do:

- a head over :data:`MAX_HEAD` bytes is answered 431 and its connection closed; one still coming past it is cut
  off then, so a connection never holds more than the bound and one read. Bodies are not counted;
- a connection that has not sent a whole head :data:`HEAD_TIMEOUT` seconds after it opened, or after a read left
  a head unfinished, is closed (408 if a head had begun). Between requests uvicorn's keep-alive timeout closes
  an idle connection; a request being answered (a long poll, a stream) is not timed;
- a connection with more than :data:`MAX_PIPELINED` requests waiting behind the one being answered is closed:
  uvicorn parses all of a read (256 KiB) and queues each request in it, a scope and a cycle apiece, so 250 KB of
  pipelined requests, their answers left unread, held ~4 MiB (bench/RESULTS.md, session 22). Browsers and
  HTTP clients do not pipeline; one that does gets the answers to the requests before the one refused, then the
  connection closes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD = 64 * 1024  # bytes of a request line and headers; a long bearer token or cookie is a few KiB
HEAD_TIMEOUT = 30.0  # seconds a head may take (nginx's client_header_timeout is 60, Node's headersTimeout 60)
MAX_PIPELINED = 16  # requests queued behind the one being answered


def _closing(status: bytes, text: bytes) -> bytes:
    """A whole plain-text answer after which the connection closes."""
    return (b"HTTP/1.1 %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, len(text), text))


TOO_LARGE = _closing(b"431 Request Header Fields Too Large", b"Request line and headers over 64 KiB")
TIMED_OUT = _closing(b"408 Request Timeout", b"Request line and headers not sent in time")


class EveryFew(logging.Filter):
    """Lets each of uvicorn's per-request warnings that anyone can set off (a request that does not parse, an
    upgrade it does not speak) through at most once per ``every`` seconds, the next one saying how many were
    not logged: one line each, a flood of garbage would otherwise fill the server's log (``server.log`` in the
    home of a server started in the background) as fast as it comes."""

    MESSAGES = frozenset({"Invalid HTTP request received.", "Unsupported upgrade request."})

    def __init__(self, every: float = 10.0) -> None:
        super().__init__()
        self.every = every
        self._last: dict[str, tuple[float, int]] = {}  # message -> (when last logged, how many dropped since)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg not in self.MESSAGES:
            return True
        now = time.monotonic()
        last, dropped = self._last.get(record.msg, (float("-inf"), 0))
        if now - last < self.every:
            self._last[record.msg] = (last, dropped + 1)
            return False
        self._last[record.msg] = (now, 0)
        if dropped:
            record.msg = f"{record.msg} ({dropped} more in the {now - last:.0f} s before this one, not logged)"
        return True


class HeadRefused(Exception):
    """A head over the bound, or one too many queued. Raised from the parser's callback: httptools stops there,
    and uvicorn answers through send_400_response."""


class BoundedProtocol(HttpToolsProtocol):
    """Counts the bytes of every read while a head is open: all of the read a request began in, and every read
    after it until its headers are complete. That count is at least the head's size, so only a head it puts over
    the bound has its size added up (a subclass that overrides ``on_headers_complete`` calls :meth:`check_head`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_open = False  # a request's first byte was read, its headers not yet complete
        self.head_seen = 0  # bytes of the reads before this one since that first byte
        self.read_size = 0  # bytes of the read being parsed
        self.refused = False
        self.waiting_since: float | None = None  # since when a whole head is awaited (None: not now)
        self.head_timer: asyncio.TimerHandle | None = None  # one per connection, not per request

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[arg-type]
        self.waiting_since = self.loop.time()
        self.head_timer = self.loop.call_later(HEAD_TIMEOUT, self.head_deadline)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None
        super().connection_lost(exc)

    def head_deadline(self) -> None:
        self.head_timer = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:  # closed, or a WebSocket now
            return
        since, now = self.waiting_since, self.loop.time()
        if since is not None and now - since >= HEAD_TIMEOUT:
            self.refused = True
            self.close_refusing(TIMED_OUT if self.head_open else None)
            return
        self.head_timer = self.loop.call_later(HEAD_TIMEOUT - (now - since if since is not None else 0.0),
                                               self.head_deadline)

    def data_received(self, data: bytes) -> None:
        if self.refused:  # closing once the answers owed are out: nothing more is read into anything
            return
        self.read_size = len(data)
        super().data_received(data)
        if self.head_open and not self.refused:
            if self.waiting_since is None:  # a head left unfinished by a read: the clock starts
                self.waiting_since = self.loop.time()
            self.head_seen += self.read_size
            if self.head_seen > MAX_HEAD and not self.transport.is_closing():
                self.refused = True
                self.send_400_response("")

    def on_message_begin(self) -> None:
        self.head_open, self.head_seen = True, 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self.check_head()
        super().on_headers_complete()

    def check_head(self) -> None:
        """The head just completed is not over the bound, nor one too many queued, else :class:`HeadRefused`."""
        self.head_open, self.waiting_since = False, None
        if len(self.pipeline) >= MAX_PIPELINED and self.cycle is not None and not self.cycle.response_complete:
            self.refused = True
            raise HeadRefused
        if self.head_seen + self.read_size > MAX_HEAD and \
                len(self.url) + sum(len(k) + len(v) + 4 for k, v in self.headers) > MAX_HEAD:
            self.refused = True
            raise HeadRefused

    def send_400_response(self, msg: str) -> None:
        if not self.refused:
            return super().send_400_response(msg)
        self.close_refusing(TOO_LARGE)

    def close_refusing(self, answer: bytes | None) -> None:
        """Close the connection with ``answer`` to the request refused; with earlier requests' answers still
        owed, after the last of them instead, reading nothing more meanwhile (the refused one gets none)."""
        if self.cycle is None or self.cycle.response_complete:
            if answer is not None:
                self.transport.write(answer)
            self.transport.close()
            return
        self.transport.pause_reading()
        last = self.pipeline[0][0] if self.pipeline else self.cycle  # queued with appendleft
        last.keep_alive = False  # uvicorn (and the lane) close the connection once it is answered
