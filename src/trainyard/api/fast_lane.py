"""The three requests of every job (submit, the launcher's report, wait) handed straight to their
endpoints, just inside the Guard.

Why: behind the Guard, FastAPI's stack (exception middleware, exit stack, its router matching each
request twice against the routes before it, the route's dependency solving) cost more CPU per request
than the lean endpoints themselves (:mod:`trainyard.api.lean`; bench/RESULTS.md, session 10), on the
path of every job and on the event loop that every other request shares.

If the app's routes cannot be found as expected (another FastAPI's internals) or an earlier route
would answer a lane's path, the lane turns itself off with a warning and every request goes through
the app: slower, never wrong.

The answers are the same: the endpoints are the routes' own functions, taking only the ``Request``;
their path parameters are read by the route's own pattern and convertors; their errors go through the
app's own exception handlers, looked up as Starlette's exception middleware looks them up; anything
without a handler propagates to the server-error middleware outside the Guard, as it did. Any other
request, or another method on these paths, goes on to the app as before. The routes stay registered
with the app: /openapi.json and its fuzzing are unchanged.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)


class FastLane:
    """ASGI middleware: ``endpoints`` (lean route functions) run without the app's routing, for
    the routes of ``app_of()`` that they are the endpoints of (looked up at the first request,
    once every router is included)."""

    def __init__(self, app: ASGIApp, *, endpoints: list[Callable[..., Any]], app_of: Callable[[], Any]) -> None:
        self.app = app
        self._endpoints = endpoints
        self._app_of = app_of
        self._routes: list[APIRoute] | None = None

    def _lanes(self) -> list[APIRoute]:
        if self._routes is None:
            try:
                self._routes = _find(set(self._endpoints), _api_routes(self._app_of().router))
            except (RuntimeError, AttributeError, TypeError) as e:
                log.warning("%s: every request goes through the app's routing", e)
                self._routes = []
        return self._routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path, root = scope["path"], scope.get("root_path", "")
            if root and path.startswith(root):  # what Starlette's routing matches: the path below the mount
                path = path[len(root):]
            for route in self._lanes():
                if scope["method"] in route.methods and (m := route.path_regex.match(path)) is not None:
                    params = {k: route.param_convertors[k].convert(v) for k, v in m.groupdict().items()}
                    return await self._run(route, {**scope, "path_params": params, "route": route,
                                                   "endpoint": route.endpoint}, receive, send)
        await self.app(scope, receive, send)

    async def _run(self, route: APIRoute, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        try:
            response = await route.endpoint(request)
        except Exception as exc:
            handler = _handler(scope["app"].exception_handlers, exc)
            if handler is None:
                raise
            response = await handler(request, exc)
        await response(scope, receive, send)


def _find(wanted: set[Callable[..., Any]], routes: list[APIRoute]) -> list[APIRoute]:
    lanes = [(i, r) for i, r in enumerate(routes) if r.endpoint in wanted]
    if len(lanes) != len(wanted):
        raise RuntimeError("fast lane: an endpoint is not a route of the app")
    for i, lane in lanes:  # skipping the routing must not skip a route the app would try first
        sample = lane.path_format.replace("{", "").replace("}", "")
        if any(r.methods & lane.methods and r.path_regex.match(sample) for r in routes[:i]):
            raise RuntimeError(f"fast lane: a route before {lane.path} answers it in the app")
    return [r for _, r in lanes]


def _handler(handlers: dict[Any, Callable[..., Any]], exc: Exception) -> Callable[..., Any] | None:
    """The app's handler for ``exc``: the one registered for its nearest class (Starlette's rule)."""
    for cls in type(exc).__mro__:
        if cls in handlers:
            return handlers[cls]
    return None


def _api_routes(router: Any) -> list[APIRoute]:
    """Every APIRoute of ``router``, those of its included routers too, in the order it tries them."""
    found: list[APIRoute] = []
    for route in router.routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif hasattr(route, "original_router"):  # FastAPI's included router
            found += _api_routes(route.original_router)
    return found
