"""``/serve/NAME/...``: one address per service, proxied to its ready replicas.

A plain ASGI app behind the Guard (which checks the caller's token) and in front of FastAPI (see
``api/app.py``): a proxied request costs no routing, middleware stack, request/response objects or
dependency resolution, and the hop to the replica goes through :mod:`trainyard.api.upstream`
(bench/serve.py measures the result against a direct request to the replica).

Streams both ways. The path after ``/serve/NAME`` is what the replica sees, as the caller encoded it;
headers of one hop and the caller's trainyard token stay here; ``X-Forwarded-*`` say where the request
came from (``X-Forwarded-Prefix: /serve/NAME`` for pages that build absolute links). Load goes to the
ready replica with the fewest requests in flight from this server (round-robin among equals). A replica
that refuses the connection is skipped for a moment and the request goes to another (nothing reached
the first one); so is one that closes a new connection without a byte of answer to an idempotent request,
which then goes to one other replica (nginx's ``proxy_next_upstream error``: a replica on its way out). With
no ready replica the request waits for one (a cold start asks the service loop for it) up to the service's
``cold_start_timeout``, then answers 503 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol
from urllib.parse import unquote

from trainyard.api.guard import CALLER_KEY
from trainyard.api.serve_hop import (HOP, PREFIX, answer, error_answer, forward_headers, open_hop, release, route_for,
                                     with_replica)
from trainyard.api.serve_origin import frame_page, is_navigation, returned, without_mark
from trainyard.api.serve_websocket import proxy_websocket
from trainyard.api.upstream import ConnectFailed, Headers, NoAnswer, Response, UpstreamError, UpstreamPool
from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.auth.tokens import bearer
from trainyard.errors import ReplicaUnreachable, ServiceNotFound, ServiceUnavailable, TrainyardError
from trainyard.services.serving import Route, ServingService

log = logging.getLogger(__name__)
# the hop to the replica frames its own body, and this server already answered any Expect: 100-continue
NOT_FORWARDED = HOP | {b"content-length", b"expect"}
BUFFER = 1 << 20  # bytes: bodies up to this size (with a length) are passed whole, larger ones streamed
GONE = 499  # what the traffic counts for a caller that left before its request was sent (nginx's code)


class CallerGone(Exception):
    """The caller disconnected while its request body was being read."""


class ServeProxy:
    """ASGI middleware: HTTP requests and WebSockets under ``/serve/NAME`` are proxied, everything else goes on
    to ``app``."""

    def __init__(self, app: Any, *, serving: ServingService, pool: UpstreamPool) -> None:
        self.app, self.serving, self.pool = app, serving, pool

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or not scope["path"].startswith(PREFIX):
            return await self.app(scope, receive, send)
        raw = scope.get("raw_path") or scope["path"].encode()
        end = raw.find(b"/", len(PREFIX))
        name = unquote(raw[len(PREFIX):end if end >= 0 else None].decode("latin-1"))
        if not name or "/" in name:  # not a service's address: whatever else the app serves there
            return await self.app(scope, receive, send)
        query = scope.get("query_string") or b""
        if scope["type"] == "websocket":
            return await proxy_websocket(scope, receive, send, self.serving, name,
                                         raw[end:] if end >= 0 else b"/", query)
        if end < 0:  # /serve/NAME: its pages' relative links need the trailing slash
            location = raw + b"/" + (b"?" + query if query else b"")
            return await answer(send, 307, b"", [(b"location", location), (b"content-length", b"0")])
        if self.serving.sandboxed:  # a service's pages open in a sandboxed frame (api/serve_origin.py)
            query = without_mark(query)
            if is_navigation(dict(scope["headers"]), scope["method"]):
                headers, body = frame_page()
                return await answer(send, 200, body, headers)
        target = raw[end:] + (b"?" + query if query else b"")
        await self._proxy(scope, receive, send, name, target)

    async def _proxy(self, scope: dict, receive: Any, send: Any, name: str, target: bytes) -> None:
        caller: Caller = scope.get(CALLER_KEY, LOCAL_ADMIN)
        try:
            route = await route_for(self.serving, name, caller)
        except ServiceNotFound as e:  # 404 before anything is counted
            return await sink_error(_AsgiSink(send, receive), e)
        sent = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        if (token := bearer(sent.decode("latin-1") if sent is not None else None)) is not None:
            self.serving.granted(token, name)  # its next requests may go straight from nginx, if one is in front

        async def request() -> tuple[bytes | AsyncIterator[bytes] | None, int | None, Headers]:
            body, length = await _body(scope, receive)
            return body, length, forward_headers(scope, name, NOT_FORWARDED)

        await relay(self.serving, self.pool, route, caller, scope["method"].encode(), target, request,
                    _AsgiSink(send, receive))


class Sink(Protocol):
    """Where a proxied answer goes: ASGI's ``send`` here, or the caller's connection itself (api/serve_lane.py)."""

    async def whole(self, status: int, headers: Headers, body: bytes) -> None:
        """A whole answer in one piece; ``headers`` carry its content-length."""

    async def start(self, status: int, headers: Headers) -> None:
        """The head of a streamed answer; its body follows in :meth:`part` calls and :meth:`end`."""

    async def part(self, chunk: bytes) -> None: ...

    async def end(self) -> None: ...

    def watch(self, upstream: Response) -> Callable[[], None]:
        """Until the function returned is called, the caller leaving breaks off ``upstream``."""


async def relay(serving: ServingService, pool: UpstreamPool, route: Route, caller: Caller, method: bytes,
                target: bytes, request: Callable[[], Awaitable[tuple[bytes | AsyncIterator[bytes] | None, int | None,
                                                                           Headers]]], sink: Sink,
                began: float | None = None, replica: tuple[str, str] | None = None) -> None:
    """One request to a ready replica of ``route`` (waiting through a cold start) and its answer to ``sink``,
    counted in the service's traffic (from ``began``, its ``perf_counter()``, when already counted as
    started). ``request()`` gives the body, its length when streamed with one, and the headers to pass on; it
    is awaited once a replica is ready. ``replica``: (job id, HOST:PORT) of the one :func:`pick` already chose
    and counted for this request, tried first (a second pick would skew the spread: api/serve_express.py)."""
    name = route.name
    if began is None:
        serving.traffic.started(name)
        began = time.perf_counter()
    job_id = replica[0] if replica is not None else None  # released below if the request never goes out
    try:
        route = await with_replica(serving, route, caller)
        body, length, headers = await request()

        passed_on = False  # a request one replica hung up on goes to one other at most: it may be what kills them

        async def send_to(replica_id: str, base: str) -> Response:
            nonlocal passed_on
            try:
                return await pool.request(base, method, target, route.signed(replica_id, headers), body, length)
            except ConnectFailed:  # nothing reached it: another replica may take the request
                raise
            except UpstreamError as e:
                if isinstance(e, NoAnswer) and not passed_on and len(route.endpoints) > 1:
                    passed_on = True
                    raise
                raise ReplicaUnreachable(f"the replica of service {name} did not answer: {e}") from None

        job_id = None  # from here open_hop counts the replica it opens, and releases the ones that fail
        job_id, upstream = await open_hop(serving, route, send_to, (ConnectFailed, NoAnswer), first=replica)
    except CallerGone:  # left before its request was whole: no one to answer, and no fault of the service
        release(serving, job_id)
        serving.traffic.ended(name, GONE, time.perf_counter() - began)
        return
    except (ServiceUnavailable, ReplicaUnreachable) as e:
        release(serving, job_id)
        serving.traffic.ended(name, e.http_status, time.perf_counter() - began)
        return await sink_error(sink, e)
    except BaseException:
        release(serving, job_id)
        serving.traffic.ended(name, 502, time.perf_counter() - began)
        raise
    await deliver(serving, name, job_id, upstream, sink, began)


async def deliver(serving: ServingService, name: str, job_id: str, upstream: Response, sink: Sink,
                  began: float) -> None:
    """The replica's answer, whose head has arrived, to ``sink``; then the request is released and counted."""
    status = upstream.status
    kept = returned(upstream.headers, HOP, serving.sandboxed)
    if upstream.length is not None and upstream.length <= BUFFER:  # small: one message to the caller
        try:
            data = await upstream.read()
        except UpstreamError as e:
            status = 502
            return await sink_error(sink, ReplicaUnreachable(f"the replica of service {name} broke off its "
                                                             f"answer: {e}"))
        finally:
            upstream.release()
            release(serving, job_id)
            serving.traffic.ended(name, status, time.perf_counter() - began)
        return await sink.whole(status, kept, data)
    ok = False
    stop = sink.watch(upstream)
    try:
        await sink.start(status, kept)
        async for chunk in upstream.chunks():
            await sink.part(chunk)
        await sink.end()
        ok = True
    except UpstreamError as e:  # the caller got part of it: its connection is closed
        log.warning("service %s: the replica broke off a streamed answer: %s", name, e)
    finally:
        stop()
        upstream.release()
        release(serving, job_id)
        serving.traffic.ended(name, status if ok else 502, time.perf_counter() - began)


async def sink_error(sink: Sink, error: TrainyardError) -> None:
    status, headers, body = error_answer(error)
    await sink.whole(status, headers, body)


class _AsgiSink:
    __slots__ = ("send", "receive")

    def __init__(self, send: Any, receive: Any) -> None:
        self.send, self.receive = send, receive

    async def whole(self, status: int, headers: Headers, body: bytes) -> None:
        await answer(self.send, status, body, headers)

    async def start(self, status: int, headers: Headers) -> None:
        await self.send({"type": "http.response.start", "status": status, "headers": headers})

    async def part(self, chunk: bytes) -> None:
        await self.send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def end(self) -> None:
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    def watch(self, upstream: Response) -> Callable[[], None]:
        return asyncio.ensure_future(_abort_when_gone(self.receive, upstream)).cancel


async def _body(scope: dict, receive: Any) -> tuple[bytes | AsyncIterator[bytes] | None, int | None]:
    """The request's body: read whole when small and of known length (it can go to another replica if the
    first refuses), else streamed on; with its length when known. None without a body."""
    length: int | None = None
    chunked = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            length = int(value) if value.isdigit() else None
        elif name == b"transfer-encoding":
            chunked = True
    if length is not None and length <= BUFFER and not chunked:
        parts = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise CallerGone
            parts.append(message.get("body", b""))
            more = message.get("more_body", False)
        return b"".join(parts), None
    if length is not None or chunked:
        return _stream(receive), None if chunked else length
    return None, None


async def _stream(receive: Any) -> AsyncIterator[bytes]:
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise CallerGone
        yield message.get("body", b"")
        more = message.get("more_body", False)


async def _abort_when_gone(receive: Any, upstream: Response) -> None:
    """A streamed answer stops when its caller leaves (uvicorn drops what is sent after that)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    upstream.abort()

