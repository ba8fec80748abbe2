"""Which callers' tokens take nginx's fast path to which service, on a server with users (``--auth``).

The server lets a token in to a service on its own way first (the Guard, the service's teams); then it tells nginx
(:func:`~trainyard.front.nginx_conf.grant_key`: the token's SHA-1 and the service's name, never the token), which
takes that token to that service for :data:`~trainyard.front.nginx_conf.GRANT_FOR` seconds. A token in use is
told again before nginx forgets it; one revoked, or a user disabled or moved, on this server: every grant is
forgotten before the change is answered, and none is made for as long again (a request let in just before the
change may tell its grant just after it). Another server sharing the database sees a change within that time, as its
own lookups do.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path

import httpx

from trainyard.front.nginx_conf import GRANT_FOR, grant_key

log = logging.getLogger("trainyard.front")
KEPT_MAX = 100_000  # grants remembered as told (a bound: one a token and service)


def control(socket_path: Path, method: str, path: str, timeout: float = 10, **kw: object) -> httpx.Response:
    """One request to nginx's control socket (front/nginx_conf.py: routes, grants, requests under way)."""
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path)), timeout=timeout) as http:
        return http.request(method, "http://front" + path, **kw).raise_for_status()


class Grants:
    def __init__(self, control_socket: Path) -> None:
        self.control_socket = control_socket
        self._told: dict[str, float] = {}  # key -> when to tell it again (monotonic)
        self._quiet_until = 0.0
        self._queue: queue.SimpleQueue[tuple[str, int] | None] = queue.SimpleQueue()
        # a grant told after a forget would outlive it: the generation it was made in is checked, and the telling
        # done, under this lock, which a forget holds while it bumps the generation and tells nginx
        self._lock = threading.Lock()
        self._generation = 0
        self._thread = threading.Thread(target=self._run, name="front-grants", daemon=True)
        self._thread.start()

    def grant(self, token: str, name: str) -> None:
        """``token`` was let in to service ``name`` just now. Never blocks: called on the event loop."""
        now = time.monotonic()
        if now < self._quiet_until:
            return
        key = grant_key(token, name)
        if self._told.get(key, 0.0) > now:
            return
        if len(self._told) >= KEPT_MAX:
            self._told = {k: t for k, t in self._told.items() if t > now}
        self._told[key] = now + GRANT_FOR / 2  # told again while in use, before nginx forgets it
        self._queue.put((key, self._generation))

    def forget(self) -> None:
        """Every grant, now: nginx has forgotten them when this returns (and none is made for GRANT_FOR seconds).
        Who may reach what has changed; called by the change, off the event loop."""
        with self._lock:
            self._quiet_until = time.monotonic() + GRANT_FOR
            self._told = {}
            self._generation += 1
            self._tell("forget\n")

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(5)

    def _tell(self, body: str) -> None:
        try:
            control(self.control_socket, "PUT", "/grants", content=body.encode())
        except httpx.HTTPError as e:  # nginx gone: the server stops (front/routes.py); until then, Python
            log.warning("the front's grants were not told to nginx: %s", e)

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if None in items:
                return
            with self._lock:
                keys = [key for key, generation in items if generation == self._generation]
                if keys:
                    self._tell("".join(k + "\n" for k in keys))
