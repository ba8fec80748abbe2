"""What the ``/serve/`` proxy's HTTP and WebSocket halves share: the service's route (waiting through a cold
start), which ready replica gets the request, the headers passed on, and errors answered before any hop."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any, Awaitable, Callable, TypeVar

from trainyard.api.serve_cookie import without_serve_cookie
from trainyard.auth.permissions import Caller
from trainyard.errors import ReplicaUnreachable, ServiceNotFound, ServiceUnavailable, TrainyardError
from trainyard.services.notify import off_loop
from trainyard.services.service_tokens import HEADER as TOKEN_HEADER
from trainyard.services.serving import Route, ServingService

PREFIX = "/serve/"
# headers of one hop (RFC 9110 §7.6.1) and the caller's trainyard token are not passed on; nor is a service token
# either way: the replica gets its own from this server (Route.signed), never a caller's, and its answer gives none back
HOP = frozenset({b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer",
                 b"transfer-encoding", b"upgrade", b"host", b"authorization", TOKEN_HEADER})
CLAIMS = frozenset({b"forwarded", b"x-real-ip"})  # beside x-forwarded-*: what proxies say of a request
QUARANTINE = 2.0  # seconds a replica that refused a connection gets no request from this server
COLD_POLL = 0.05  # seconds between looks for a first ready replica during a cold start
T = TypeVar("T")
_rr = itertools.count()
_refused: dict[str, float] = {}  # replica job -> until when it is skipped


async def route_for(service: ServingService, name: str, caller: Caller) -> Route:
    """The service's route as ``caller`` may see it: ServiceNotFound otherwise."""
    route = service.cached_route(name) or await off_loop(service.route, name, caller)
    if not caller.sees(route.team, route.owner):
        raise ServiceNotFound(f"no such service: {name}", service=name)
    return route


async def with_replica(service: ServingService, route: Route, caller: Caller) -> Route:
    """The route once a replica is ready (a cold start asks the service loop for one); ServiceUnavailable after
    the service's cold-start timeout. Writes the request down for the autoscaler when due."""
    if service.touch_due(route):  # the leader's autoscaler hears of requests to any server
        await off_loop(service.touch, route)
    deadline = time.monotonic() + route.cold_start_timeout
    while not route.endpoints:
        if service.touch_due(route):
            await off_loop(service.touch, route)
        if time.monotonic() >= deadline:
            raise ServiceUnavailable(f"service {route.name} has no ready replica after "
                                     f"{route.cold_start_timeout:g}s; try again shortly", service=route.name)
        await asyncio.sleep(COLD_POLL)
        route = await route_for(service, route.name, caller)
    return route


def pick(route: Route, tried: set[str], outstanding: dict[str, int]) -> tuple[str, str]:
    """The ready replica with the fewest requests in flight (round-robin among equals): (job id, HOST:PORT).
    The caller counts the request in ``outstanding`` and calls :func:`release` when done."""
    choices = route.endpoints
    if tried or _refused:
        now = time.monotonic()
        for gone in [job for job, until in _refused.items() if until <= now]:
            del _refused[gone]
        choices = [e for e in route.endpoints if e[0] not in tried and _refused.get(e[0], 0.0) <= now]
        if not choices:
            choices = [e for e in route.endpoints if e[0] not in tried] or route.endpoints
    if len(choices) == 1:
        job_id, base = choices[0]
    else:
        start = next(_rr) % len(choices)
        job_id, base = min(choices[start:] + choices[:start], key=lambda e: outstanding.get(e[0], 0))
    outstanding[job_id] = outstanding.get(job_id, 0) + 1
    return job_id, base.removeprefix("http://")


async def open_hop(service: ServingService, route: Route, open_: Callable[[str, str], Awaitable[T]],
                   refusal: type[BaseException] | tuple[type[BaseException], ...],
                   first: tuple[str, str] | None = None) -> tuple[str, T]:
    """``open_(job id, HOST:PORT)`` to a ready replica, as :func:`pick` chooses (``first``: (job id, HOST:PORT) of one
    it already chose and counted for this request, tried before any other): (its job id, what ``open_``
    returned), the request counted on it (:func:`release` it when done). A replica that raises
    ``refusal`` (nothing reached it, or it hung up without an answer to a request that may be sent again) is
    skipped for a moment and the next one tried; ReplicaUnreachable once all refused."""
    tried: set[str] = set()
    while True:
        job_id, base = first or pick(route, tried, service.outstanding)
        first = None
        try:
            return job_id, await open_(job_id, base)
        except refusal:
            release(service, job_id)
            refused(job_id)
            tried.add(job_id)
            if len(tried) >= len(route.endpoints):
                raise ReplicaUnreachable(f"no replica of service {route.name} accepts connections") from None
        except BaseException:
            release(service, job_id)
            raise


def refused(job_id: str) -> None:
    """The replica refused a connection: skipped for :data:`QUARANTINE` seconds."""
    _refused[job_id] = time.monotonic() + QUARANTINE


def release(service: ServingService, job_id: str | None) -> None:
    if job_id is None:
        return
    n = service.outstanding.get(job_id, 0) - 1
    if n > 0:
        service.outstanding[job_id] = n
    else:
        service.outstanding.pop(job_id, None)


def forward_headers(scope: dict, name: str, dropped: frozenset[bytes]) -> list[tuple[bytes, bytes]]:
    """The caller's headers for the replica, less ``dropped`` and this server's sign-in cookie, with
    ``X-Forwarded-*`` saying where the request came from (``X-Forwarded-Prefix: /serve/NAME``). A caller's own
    claims of what a proxy would say (``X-Forwarded-*`` but the For it adds to, ``Forwarded``, ``X-Real-IP``) are
    dropped: a replica may trust them."""
    headers = []
    before = host = None
    for k, v in scope["headers"]:
        if k.startswith(b"x-forwarded-") or k in CLAIMS:
            if k == b"x-forwarded-for":
                before = v
        elif k == b"cookie":
            if v := without_serve_cookie(v):
                headers.append((k, v))
        elif k not in dropped:
            headers.append((k, v))
        elif k == b"host":
            host = v
    client = scope["client"][0].encode() if scope.get("client") else b""
    if before and before.rpartition(b",")[2].strip() == client:
        client = b""  # behind trusted proxies (nginx in front) the caller was read from this very header
    headers += [(b"x-forwarded-for", before + b", " + client if before and client else before or client),
                (b"x-forwarded-proto", scope["scheme"].encode()),
                (b"x-forwarded-host", host or b""),
                (b"x-forwarded-prefix", PREFIX.encode() + name.encode())]
    return headers


def error_answer(error: TrainyardError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Status, headers and body of the JSON error answered for ``error`` (503s say when to retry)."""
    body = json.dumps(error.to_dict()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if isinstance(error, ServiceUnavailable):
        headers.append((b"retry-after", b"5"))
    return error.http_status, headers, body


async def answer(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    """One whole HTTP answer; ``headers`` carry its content-length (the replica's, or the caller's own)."""
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
