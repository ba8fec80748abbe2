"""``/serve/NAME/...``: one address per service, proxied to its ready replicas.

Streams both ways through one shared httpx client (pooled connections to the
replicas). The path after ``/serve/NAME`` is what the replica sees; headers of
one hop and the caller's trainyard token stay here; ``X-Forwarded-*`` say where
the request came from (``X-Forwarded-Prefix: /serve/NAME`` for pages that build
absolute links). Load goes to the ready replica with the fewest requests in
flight from this server (round-robin among equals). A replica that refuses the
connection is skipped for a moment and the request goes to another (nothing
reached the first one). With no ready replica the request waits for one (a
cold start asks the service loop for it) up to the service's
``cold_start_timeout``, then answers 503 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import AsyncIterator

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from trainyard.api.guard import CALLER_KEY
from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.errors import ReplicaUnreachable, ServiceNotFound, ServiceUnavailable
from trainyard.services.notify import off_loop
from trainyard.services.serving import Route, ServingService

router = APIRouter(tags=["serve"])
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
# headers of one hop (RFC 9110 §7.6.1) and the caller's trainyard token are not passed on
HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                 "transfer-encoding", "upgrade", "host", "authorization"})
QUARANTINE = 2.0  # seconds a replica that refused a connection gets no request from this server
BUFFER = 1 << 20  # bytes: bodies up to this size (with a length) are passed whole, larger ones streamed
COLD_POLL = 0.05  # seconds between looks for a first ready replica during a cold start
_rr = itertools.count()
_refused: dict[str, float] = {}  # replica job -> until when it is skipped


def _client(request: Request) -> httpx.AsyncClient:
    client = getattr(request.app.state, "serve_client", None)
    if client is None:
        # trust_env off: a replica is reached directly, never through the server's HTTP(S)_PROXY
        client = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=5.0), follow_redirects=False, trust_env=False,
                                   limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200))
        request.app.state.serve_client = client
    return client


async def close(app: object) -> None:
    """Close the shared client (the app's lifespan calls this at shutdown)."""
    client = getattr(getattr(app, "state", None), "serve_client", None)
    if client is not None:
        await client.aclose()


@router.api_route("/serve/{name}", methods=METHODS, include_in_schema=False)
async def serve_root(name: str, request: Request) -> Response:
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(f"/serve/{name}/{query}", status_code=307)


@router.api_route("/serve/{name}/{path:path}", methods=METHODS, include_in_schema=False)
async def serve(name: str, path: str, request: Request) -> Response:
    # no dependencies: a sync one (the caller's) would cost a thread hop on every proxied request
    service: ServingService = request.app.state.platform.serving
    caller: Caller = request.scope.get(CALLER_KEY, LOCAL_ADMIN)
    route = await _route(service, name, caller)  # 404 before anything is counted
    service.traffic.started(name)
    began = time.perf_counter()
    status = 502
    job_id: str | None = None
    try:
        if service.touch_due(route):  # the leader's autoscaler hears of requests to any server
            await off_loop(service.touch, route)
        if not route.endpoints:
            route = await _cold_start(service, route, caller)
        body = await _body(request)
        headers = _forward_headers(request, name)
        url_path = "/" + path
        tried: set[str] = set()
        while True:
            job_id, base = _pick(route, tried, service.outstanding)
            service.outstanding[job_id] = service.outstanding.get(job_id, 0) + 1
            client = _client(request)
            req = client.build_request(request.method, base + url_path,
                                       params=request.url.query.encode() or None, headers=headers, content=body)
            try:
                upstream = await client.send(req, stream=True)
                break
            except httpx.ConnectError:  # nothing reached it: another replica may take the request
                _release(service, job_id)
                _refused[job_id] = time.monotonic() + QUARANTINE
                tried.add(job_id)
                job_id = None
                if (isinstance(body, _Body) and body.started) or len(tried) >= len(route.endpoints):
                    raise ReplicaUnreachable(f"no replica of service {name} accepts connections") from None
            except httpx.TransportError as e:
                raise ReplicaUnreachable(f"the replica of service {name} did not answer: {e}") from None
        status = upstream.status_code
    except (ServiceUnavailable, ReplicaUnreachable) as e:
        if job_id is not None:
            _release(service, job_id)
        status = e.http_status
        service.traffic.ended(name, status, time.perf_counter() - began)
        extra = {"Retry-After": "5"} if isinstance(e, ServiceUnavailable) else {}
        return JSONResponse(e.to_dict(), status_code=status, headers=extra)
    except BaseException:
        if job_id is not None:
            _release(service, job_id)
        service.traffic.ended(name, 502, time.perf_counter() - began)
        raise
    kept = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in upstream.headers.multi_items()
            if k.lower() not in HOP]
    length = upstream.headers.get("content-length", "")
    if length.isdigit() and int(length) <= BUFFER:  # small: one message to the client, as it came (raw)
        try:
            data = b"".join([chunk async for chunk in upstream.aiter_raw()])
        except httpx.TransportError as e:
            status = 502
            return JSONResponse(ReplicaUnreachable(f"the replica of service {name} broke off its answer: {e}")
                                .to_dict(), status_code=502)
        finally:
            await upstream.aclose()
            _release(service, job_id)  # type: ignore[arg-type]
            service.traffic.ended(name, status, time.perf_counter() - began)
        response = Response(data, status_code=status)
        response.raw_headers = kept
        return response

    async def stream() -> AsyncIterator[bytes]:
        ok = False
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
            ok = True
        finally:
            await upstream.aclose()
            _release(service, job_id)  # type: ignore[arg-type]
            service.traffic.ended(name, status if ok else 502, time.perf_counter() - began)

    response = StreamingResponse(stream(), status_code=status)
    response.raw_headers = kept
    return response


async def _route(service: ServingService, name: str, caller: Caller) -> Route:
    route = service.cached_route(name) or await off_loop(service.route, name, caller)
    if not caller.sees(route.team, route.owner):
        raise ServiceNotFound(f"no such service: {name}", service=name)
    return route


async def _cold_start(service: ServingService, route: Route, caller: Caller) -> Route:
    """The route once a replica is ready; ServiceUnavailable after the service's cold-start timeout."""
    deadline = time.monotonic() + route.cold_start_timeout
    while not route.endpoints:
        if service.touch_due(route):
            await off_loop(service.touch, route)
        if time.monotonic() >= deadline:
            raise ServiceUnavailable(f"service {route.name} has no ready replica after "
                                     f"{route.cold_start_timeout:g}s; try again shortly", service=route.name)
        await asyncio.sleep(COLD_POLL)
        route = await _route(service, route.name, caller)
    return route


def _pick(route: Route, tried: set[str], outstanding: dict[str, int]) -> tuple[str, str]:
    """The ready replica with the fewest requests in flight (round-robin among equals)."""
    now = time.monotonic()
    choices = [e for e in route.endpoints if e[0] not in tried and _refused.get(e[0], 0.0) <= now]
    if not choices:
        choices = [e for e in route.endpoints if e[0] not in tried] or route.endpoints
    start = next(_rr) % len(choices)
    turn = choices[start:] + choices[:start]
    return min(turn, key=lambda e: outstanding.get(e[0], 0))


def _release(service: ServingService, job_id: str) -> None:
    n = service.outstanding.get(job_id, 0) - 1
    if n > 0:
        service.outstanding[job_id] = n
    else:
        service.outstanding.pop(job_id, None)


async def _body(request: Request) -> "bytes | _Body | None":
    """A small body read whole (it can go to another replica if the first refuses), a large or chunked one
    streamed on, or none."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) <= BUFFER:
        return await request.body()
    if length is not None or "transfer-encoding" in request.headers:
        return _Body(request)
    return None


class _Body:
    """The request body, streamed on; ``started`` once any of it was read (it cannot be sent twice)."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.started = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self.started = True
        async for chunk in self.request.stream():
            if chunk:
                yield chunk


def _forward_headers(request: Request, name: str) -> list[tuple[str, str]]:
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP and not k.lower().startswith("x-forwarded-")]
    client = request.client.host if request.client else ""
    before = request.headers.get("x-forwarded-for")
    headers += [("x-forwarded-for", f"{before}, {client}" if before else client),
                ("x-forwarded-proto", request.url.scheme),
                ("x-forwarded-host", request.headers.get("host", "")),
                ("x-forwarded-prefix", f"/serve/{name}")]
    return headers
