"""The short way for small ``/serve/`` requests: proxied from uvicorn's HTTP protocol itself, without ASGI.

A request through ``/serve/NAME`` cost this server ~0.19 ms of CPU against ~0.10 ms for the whole answer
of a small replica, where a plain byte relay adds 0.02-0.05 ms on the same machine (bench/RESULTS.md, session
16). Part of that was the usual way's layers: an ASGI scope, the request cycle and its messages, the Guard
and the proxy as middlewares, the head and body of the answer written apart; without them the hop costs about
a third less (0.14-0.16 ms → 0.10-0.14 ms from a raw client; the rest is Python's work per request). Here
:class:`LaneProtocol`, uvicorn's httptools protocol, takes a request when its head is parsed. Once it is
whole, :func:`~trainyard.api.serve_express.express` sends it at once on a connection to the replica that
waits in the pool and writes a small answer back from that connection's callback; otherwise
:func:`~trainyard.api.serve_proxy.relay`, in a task, writes the answer straight to the connection, whole in
one write when it is small.

A request takes the lane only when all this holds once its head is parsed; any other goes the usual way
(the Guard, then :class:`~trainyard.api.serve_proxy.ServeProxy`), which answers every case left out here:

- HTTP/1.1 kept alive; no earlier request of the connection still in flight (pipelined requests keep their
  order); no Upgrade, ``Expect``, ``Transfer-Encoding`` or cookie, not a browser opening a page (nor its sandboxed
  frame: api/serve_origin.py); a body of known length up to
  :data:`~trainyard.api.serve_proxy.BUFFER`; a service name with nothing to decode;
- a Host this server answers to, and a caller known without a database read (the Guard's
  :meth:`~trainyard.api.guard.Guard.caller_now`);
- the service's route cached, with a ready replica, and the caller may see the service.

What the replica gets and what the caller gets back are the same either way: the same relay, headers passed
on and returned, replica choice, retry on a refused connection, traffic counts and errors.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Coroutine

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from trainyard.api.bounded_http import BoundedProtocol
from trainyard.api.guard import Guard
from trainyard.api.serve_express import _Express, express
from trainyard.api.serve_hop import PREFIX, forward_headers, pick
from trainyard.api.serve_origin import FRAME_MARK
from trainyard.api.serve_proxy import BUFFER, NOT_FORWARDED, ServeProxy, relay
from trainyard.api.upstream import Headers, Response
from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.services.serving import Route

log = logging.getLogger(__name__)
_PREFIX = PREFIX.encode()
_ELSEWHERE = frozenset({b"transfer-encoding", b"expect", b"cookie", b"upgrade"})  # headers the usual way handles
_NO_BODY = frozenset({204, 304})
_FAILED = b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain; charset=utf-8\r\n" \
          b"content-length: 21\r\nconnection: close\r\n\r\nInternal Server Error"


class ServeLane:
    """Which requests take the lane, and their run: the app's ``/serve/`` Guard and proxy, as they are."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.proxy: ServeProxy = guard.app
        self.taken = 0  # requests that took the lane (tests read it)
        self.expressed = 0  # of those, sent at once on a waiting connection (api/serve_express.py)
        self.open = True  # closed for good if take() ever fails: a uvicorn unlike the one this was written for
        self.background: set[asyncio.Task] = set()  # the autoscaler's notes, written off the loop
        self.waiting: set[_Express] = set()  # requests sent at once whose answer is not whole yet
        self.watchdog: asyncio.TimerHandle | None = None  # looks for silent replicas while any are waiting

    def take(self, proto: "LaneProtocol") -> "_Exchange | None":
        """The request whose head ``proto`` has just parsed, if it takes the lane; None for the usual way."""
        url: bytes = proto.url
        parser = proto.parser
        if (not url.startswith(_PREFIX) or b"#" in url or FRAME_MARK in url or parser.should_upgrade()
                or parser.get_http_version() != "1.1" or not parser.should_keep_alive()):
            return None
        end = url.find(b"/", len(_PREFIX))
        raw_name = url[len(_PREFIX):end]
        if end < 0 or not raw_name or b"%" in raw_name or b"?" in raw_name:
            return None
        method = parser.get_method()
        if method == b"CONNECT":
            return None
        authorization = host = None
        sized = False  # a body with a length (0 too): the replica gets its content-length, as the usual way sends
        for name, value in proto.headers:
            if name == b"content-length":
                if not value.isdigit() or int(value) > BUFFER:
                    return None
                sized = True
            elif name == b"authorization":
                authorization = value
            elif name == b"host":
                host = value
            elif name in _ELSEWHERE or (name == b"sec-fetch-dest" and value == b"document"):
                return None  # (a browser opening a page: the frame page may answer it, api/serve_origin.py)
        guard = self.guard
        if host != proto.host_ok:
            if not guard.answers(host):
                return None
            proto.host_ok = host  # the same Host on the connection's next request needs no new look
        caller = proto.known_caller(authorization, guard)
        if caller is None:
            return None
        name = raw_name.decode("latin-1")
        route = self.proxy.serving.cached_route(name)
        if route is None or not route.endpoints or not caller.sees(route.team, route.owner):
            return None
        self.taken += 1
        return _Exchange(proto, route, caller, method, url[end:], proto.forwarded(name), [] if sized else None)

    def go(self, ex: "_Exchange") -> None:
        """Proxy the whole request ``ex`` to the replica picked here: the quickest way when it can
        (api/serve_express.py), else in a task."""
        proxy = self.proxy
        replica = None
        try:
            if ex.route.endpoints:
                replica = pick(ex.route, set(), proxy.serving.outstanding)
                if express(self, ex, *replica):
                    self.expressed += 1
                    return
        except Exception:
            log.exception("service %s: proxying a request failed", ex.route.name)
            return ex.fail()
        self.start(ex, relay(proxy.serving, proxy.pool, ex.route, ex.caller, ex.method, ex.target, ex.request, ex,
                             replica=replica))

    def start(self, ex: "_Exchange", work: Coroutine[Any, Any, None]) -> None:
        """``work`` on ``ex`` in a task of its connection (uvicorn waits for those at shutdown)."""
        tasks = ex.proto.tasks
        task = ex.proto.loop.create_task(self._run(ex, work))
        task.add_done_callback(tasks.discard)
        tasks.add(task)

    @staticmethod
    async def _run(ex: "_Exchange", work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception:
            log.exception("service %s: proxying a request failed", ex.route.name)
            ex.fail()
        except BaseException:
            ex.fail()
            raise
        else:
            if not ex.response_complete:  # a streamed answer the replica broke off: its end would never come, and
                ex.fail()  # the caller would wait on the connection for good (uvicorn closes it the usual way)


class LaneProtocol(BoundedProtocol):
    """uvicorn's httptools protocol (with its head bounded); a request that :meth:`ServeLane.take` takes skips
    the app."""

    lane: ServeLane  # set by lane_protocol()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._exchange: _Exchange | None = None  # taken, its body still arriving
        self._admin: bytes | None = None  # the Authorization header found to be the server's own token
        self._at: tuple[Caller, Caller] | None = None  # a caller, and the same at this connection's address
        self.host_ok: bytes | None | bool = False  # the last Host header this server was found to answer to
        self._forwarded: tuple[str, Headers, Headers] | None = None  # service, request headers, what they became
        self._idle_since: float | None = None  # when the last answer ended; None while a request is under way

    def on_message_begin(self) -> None:
        # uvicorn's ASGI scope (a dict, a copy of the app's state) is made only for a request that goes the usual
        # way, in on_headers_complete; the lane reads the headers, client and scheme from the protocol
        self.url, self.expect_100_continue, self.headers = b"", False, []
        self.head_open, self.head_seen = True, 0  # BoundedProtocol's count

    def _scope(self) -> None:
        url, headers, expect = self.url, self.headers, self.expect_100_continue
        super().on_message_begin()
        self.url, self.expect_100_continue = url, expect
        self.scope["headers"] = self.headers = headers

    def forwarded(self, name: str) -> Headers:
        """The request's headers for a replica of service ``name`` (serve_hop.forward_headers); a connection's
        requests mostly carry the same headers, so the last result is kept for the next."""
        last = self._forwarded
        if last is not None and last[0] == name and last[1] == self.headers:
            return last[2]
        headers = forward_headers({"headers": self.headers, "client": self.client, "scheme": self.scheme}, name,
                                  NOT_FORWARDED)
        self._forwarded = (name, self.headers, headers)
        return headers

    def known_caller(self, authorization: bytes | None, guard: Guard) -> Caller | None:
        """As :meth:`Guard.caller_now`, at this connection's address; the server's own token is checked once per
        connection (it never changes while the server runs)."""
        if authorization is not None and authorization == self._admin:
            caller: Caller | None = LOCAL_ADMIN
        else:
            caller = guard.caller_now(authorization)
            if caller is LOCAL_ADMIN and guard.required:
                self._admin = authorization
        if caller is None:
            return None
        if self._at is None or self._at[0] is not caller:
            self._at = (caller, caller.at(self.client[0]) if self.client else caller)
        return self._at[1]

    def on_headers_complete(self) -> None:
        self.check_head()
        lane = self.lane
        if lane.open and (self.cycle is None or self.cycle.response_complete):
            try:
                taken = lane.take(self)
            except Exception:  # a uvicorn whose protocol differs from the one this was written for
                log.exception("the /serve/ lane is closed: every request goes the usual way")
                lane.open, taken = False, None
            if taken is not None:
                self.cycle = self._exchange = taken  # type: ignore[assignment]
                return
        self._scope()
        super().on_headers_complete()

    # uvicorn arms a keep-alive timer after every answer and cancels it at the next request's first bytes, ~4 µs
    # of a proxied request here; instead the timer stays armed while requests come, and looks again when it fires
    def _unset_keepalive_if_required(self) -> None:
        self._idle_since = None  # called at every request's first bytes: the transport is asked only with a timer
        if self.timeout_keep_alive_task is not None and self.transport.is_closing():
            super()._unset_keepalive_if_required()

    def on_response_complete(self) -> None:
        if self.pipeline or self.transport.is_closing():
            return super().on_response_complete()  # the next request starts, or the connection is done
        if self.timeout_keep_alive_task is None:
            super().on_response_complete()  # arms the timer
        else:  # uvicorn's steps but the timer's
            self.server_state.total_requests += 1
            self.flow.resume_reading()
        self._idle_since = self.loop.time()

    def timeout_keep_alive_handler(self) -> None:
        self.timeout_keep_alive_task = None
        if self._idle_since is None:  # a request under way: its answer arms the timer again
            return
        left = self._idle_since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self.timeout_keep_alive_task = self.loop.call_later(left, self.timeout_keep_alive_handler)
        else:
            super().timeout_keep_alive_handler()

    def on_body(self, body: bytes) -> None:
        if self._exchange is not None:
            self._exchange.body.append(body)  # type: ignore[union-attr]  # a body without a length goes the usual way
        else:
            super().on_body(body)

    def on_message_complete(self) -> None:
        ex, self._exchange = self._exchange, None
        if ex is None:
            return super().on_message_complete()
        self.lane.go(ex)


def lane_protocol(lane: ServeLane) -> type[LaneProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)``."""
    return type("LaneProtocol", (LaneProtocol,), {"lane": lane})


_defaults: tuple[list, bytes] = ([], b"")  # uvicorn's default answer headers, and as bytes


class _Exchange:
    """A request on the lane: where its answer is written (a :class:`~trainyard.api.serve_proxy.Sink`), and what
    uvicorn's protocol looks at in its request cycle when the connection is lost or the server shuts down."""

    __slots__ = ("proto", "route", "caller", "method", "target", "headers", "body", "response_complete",
                 "disconnected", "keep_alive", "message_event", "_upstream", "_chunked", "_started")

    def __init__(self, proto: LaneProtocol, route: Route, caller: Caller, method: bytes, target: bytes,
                 headers: Headers, body: list[bytes] | None) -> None:
        self.proto, self.route, self.caller, self.method, self.target = proto, route, caller, method, target
        self.headers = headers
        self.body = body  # its parts as they arrive; None without a content-length
        self.response_complete = self.disconnected = False
        self.keep_alive = True  # uvicorn's shutdown turns it off: the connection closes after this answer
        self.message_event = self  # uvicorn sets it when the connection is lost: see set()
        self._upstream: Response | None = None
        self._chunked = self._started = False

    def set(self) -> None:
        if self._upstream is not None:  # a streamed answer whose caller left
            self._upstream.abort()

    async def request(self) -> tuple[bytes | None, None, Headers]:
        return b"".join(self.body) if self.body is not None else None, None, self.headers

    # -- the Sink
    async def whole(self, status: int, headers: Headers, body: bytes) -> None:
        self.write_whole(status, headers, body)

    def write_whole(self, status: int, headers: Headers, body: bytes) -> None:
        self._write(self._head(status, headers) + body)
        self._done()

    async def start(self, status: int, headers: Headers) -> None:
        extra: Headers = []
        if (self.method != b"HEAD" and status >= 200 and status not in _NO_BODY
                and not any(k == b"content-length" for k, _ in headers)):
            self._chunked = True
            extra.append((b"transfer-encoding", b"chunked"))
        self._write(self._head(status, headers + extra))

    async def part(self, chunk: bytes) -> None:
        if chunk and self.method != b"HEAD":
            self._write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if self._chunked else chunk)
        flow = self.proto.flow
        if flow.write_paused and not self.disconnected:
            await flow.drain()

    async def end(self) -> None:
        if self._chunked:
            self._write(b"0\r\n\r\n")
        self._done()

    def watch(self, upstream: Response) -> Callable[[], None]:
        self._upstream = upstream
        if self.disconnected:
            upstream.abort()
        return self._unwatch

    def _unwatch(self) -> None:
        self._upstream = None

    # -- writing
    def _head(self, status: int, headers: Headers) -> bytes:
        global _defaults
        default = self.proto.server_state.default_headers  # a new list each second (its date)
        if default is not _defaults[0]:
            _defaults = (default, b"".join([b"%s: %s\r\n" % h for h in default]))
        return b"".join([STATUS_LINE.get(status) or b"HTTP/1.1 %d \r\n" % status, _defaults[1],
                         *[b"%s: %s\r\n" % h for h in headers],
                         b"\r\n" if self.keep_alive else b"connection: close\r\n\r\n"])

    def _write(self, data: bytes) -> None:
        self._started = True
        transport = self.proto.transport
        if not self.disconnected and not transport.is_closing():
            transport.write(data)

    def _done(self) -> None:
        if self.response_complete:
            return
        self.response_complete = True
        if not self.keep_alive:
            self.proto.transport.close()
        self.proto.on_response_complete()

    def fail(self) -> None:
        """The relay raised: a 500 if nothing was written yet, and the connection closed either way (as uvicorn
        does for an app that raises)."""
        if self.response_complete:
            return
        if not self._started:
            self._write(_FAILED)
        self.response_complete = True
        self.proto.transport.close()

