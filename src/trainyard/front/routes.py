"""Keeping nginx's fast routes to what the services' ready replicas are now, in every server with a front."""

from __future__ import annotations

import logging
import os
import signal
import threading

from trainyard.front.nginx import NginxFront
from trainyard.front.nginx_conf import FastRoute, Replica
from trainyard.services.serving import ROUTE_TTL, ServingService
from trainyard.spec.service import ServiceStatus

log = logging.getLogger("trainyard.front")


def fast_routes(serving: ServingService, opened: dict[str, str | None]) -> list[FastRoute]:
    """Every running service's ready replicas, not draining, with their tokens (``opened``: sealed → token, kept
    between calls: a token is opened once, not at every look)."""
    rows = [r for r in serving.services.list(include_ended=False) if r["status"] == ServiceStatus.RUNNING]
    replicas = serving.services.replicas([r["id"] for r in rows]) if rows else {}
    routes = []
    for row in rows:
        ready = []
        for r in replicas.get(row["id"], []):
            if not (r["ready"] and r["draining_since"] is None and r["address"]):
                continue
            sealed = r["token"]
            if sealed is not None and sealed not in opened:
                opened[sealed] = serving.tokens.token(sealed)
            ready.append(Replica(r["address"], opened.get(sealed) if sealed is not None else None))
        if ready:
            routes.append(FastRoute(row["name"], tuple(ready)))
    return routes


class RouteSync:
    """A thread that looks every :data:`ROUTE_TTL` seconds, as long as the Python hop reuses a route: a replica
    drained or gone leaves nginx's routes as soon as it leaves the Python hop's (the service loop keeps a drained
    replica up for a second, then stops it once nothing is in flight on it)."""

    def __init__(self, front: NginxFront, serving: ServingService, every: float = ROUTE_TTL) -> None:
        self.front = front
        self.serving = serving
        self.every = every
        self._opened: dict[str, str | None] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="front-routes", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # never started: the server's start-up was stopped before it
            self._thread.join(5)

    def sync(self) -> bool:
        routes = fast_routes(self.serving, self._opened)
        live = {r.token for route in routes for r in route.replicas}
        self._opened = {k: v for k, v in self._opened.items() if v in live}  # ended replicas' tokens go
        return self.front.update(routes)

    def _run(self) -> None:
        failing = False
        while not self._stop.wait(self.every):
            if not self.front.alive():
                # the port is nginx's: without it nobody reaches this server. Stopping lets a service manager
                # start both again; running jobs keep running meanwhile
                log.error("nginx in front of this server exited (see %s): stopping the server",
                          self.front.prefix / "error.log")
                os.kill(os.getpid(), signal.SIGTERM)
                return
            try:
                self.sync()
                failing = False
            except Exception:  # a database hiccup: the routes stay as they were until the next look
                if not failing:
                    log.exception("the front's routes could not be read; they stay as they were")
                failing = True
