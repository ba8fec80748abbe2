"""The FastAPI application: routers, the error mapping, and the platform's lifespan."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError

import trainyard
from trainyard.api.fast_lane import FastLane
from trainyard.api.guard import MAX_BODY, Guard
from trainyard.api.request_errors import invalid
from trainyard.api.routers import (clusters, dashboard, identity, job_text, jobs, monitoring, nodes, pipelines, queues,
                                   secrets, replica_requests, schedules, services, sweeps, system, webhooks)
from trainyard.api.serve_proxy import PREFIX as SERVE_PREFIX
from trainyard.api.serve_lane import ServeLane
from trainyard.api.serve_proxy import ServeProxy
from trainyard.api.upstream import UpstreamPool
from trainyard.errors import AttemptNotFound, InvalidSpec, TrainyardError
from trainyard.services.platform import Platform
from trainyard.ui import mount as mount_ui

log = logging.getLogger(__name__)


# FastAPI's own OpenTelemetry stays off: it would record a span and metrics of every request, with its path and query,
# as soon as anything in the process set a global provider (a library, an operator's sitecustomize), unasked; and its
# look for providers cost ~7 µs of every request. trainyard's own metrics are at /metrics.
NO_TELEMETRY = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}


class _API(FastAPI):
    """FastAPI, with ``/serve/`` answered in front of it: a proxied request skips FastAPI's own work on
    every request (its telemetry check, error, body-limit and exception middlewares, routing), which cost
    more CPU than the replica's whole answer (bench/serve.py)."""

    front: Any = None  # the Guard over the proxy, set by create_app
    lane: ServeLane | None = None  # the short way to the same proxy, for uvicorn's protocol (trainyard.server)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and scope["path"].startswith(SERVE_PREFIX) and self.front is not None:
            return await self.front(scope, receive, send)
        return await super().__call__(scope, receive, send)


def create_app(platform: Platform, server_url: str | None = None,
               on_ready: Callable[[], None] | None = None, on_stop: Callable[[], None] | None = None,
               on_lead: Callable[[], None] | None = None, allowed_hosts: tuple[str, ...] | None = None) -> FastAPI:
    """The API over ``platform``. With ``allowed_hosts``, requests naming any other Host are refused;
    with a token in the platform's settings, every request but ``/healthz`` must carry it; ``on_lead``
    runs each time this server takes over scheduling."""
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        platform.start(server_url or platform.server_url, on_lead=on_lead)
        if on_ready:
            on_ready()
        try:
            yield
        finally:
            if on_stop:
                on_stop()
            await upstream.close()
            platform.stop()

    upstream = UpstreamPool()
    app = _API(title="trainyard", version=trainyard.__version__, lifespan=lifespan, telemetry=NO_TELEMETRY)
    settings = platform.settings
    guard = {"identity": platform.identity, "required": settings.token_sha256 is not None or settings.auth,
             "users": settings.auth, "allowed_hosts": allowed_hosts}
    # inside the Guard (added first: Starlette wraps the middleware added last outermost)
    app.add_middleware(FastLane, endpoints=[jobs.submit, jobs.wait_job, system.report], app_of=lambda: app)
    app.add_middleware(Guard, **guard, max_body=MAX_BODY)
    # /serve/NAME/...: the same Guard checks the caller; a path there that names no service goes on to the app
    app.front = Guard(ServeProxy(partial(FastAPI.__call__, app), serving=platform.serving, pool=upstream), **guard)
    app.lane = ServeLane(app.front)
    app.state.platform = platform
    app.include_router(system.router)
    app.include_router(nodes.router)
    app.include_router(jobs.router)
    app.include_router(job_text.router)
    app.include_router(replica_requests.router)
    app.include_router(queues.router)
    app.include_router(pipelines.router)
    app.include_router(clusters.router)
    app.include_router(dashboard.router)
    app.include_router(sweeps.router)
    app.include_router(schedules.router)
    app.include_router(webhooks.router)
    app.include_router(secrets.router)
    app.include_router(monitoring.router)
    app.include_router(identity.router)
    app.include_router(services.router)
    mount_ui(app)  # last: its page shell answers every path no router owns

    @app.exception_handler(TrainyardError)
    async def _trainyard_error(request: Request, exc: TrainyardError) -> JSONResponse:
        status = exc.http_status
        if isinstance(exc, AttemptNotFound) and request.url.path.startswith("/internal/"):
            status = 410  # tells a launcher to stop reporting for an attempt the server forgot
        return JSONResponse(exc.to_dict(), status_code=status)

    @app.exception_handler(DataError)
    async def _unstorable(request: Request, exc: DataError) -> JSONResponse:
        # a value the database refuses (a NUL in text on PostgreSQL, a number past its column) that no check
        # before it caught: the caller's input, not the server's fault
        log.warning("%s %s: the database refused a value: %s", request.method, request.url.path, exc.orig)
        error = InvalidSpec("a value in the request cannot be stored (a NUL byte, or a number out of range)")
        return JSONResponse(error.to_dict(), status_code=422)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(invalid(request, exc).to_dict(), status_code=422)

    return app
