"""One kept-alive ``http.client`` connection for the SDK's JSON requests on a job's path (submit, wait).

Why: httpx spent ~0.3 ms of CPU per request on an idle machine (its URL parsed three times, h11's
state machine, its request and response models) and ~0.7 ms cold, on the path of every job,
where ``http.client`` spends ~0.06 ms (bench/RESULTS.md, session 11).

Only where httpx would do nothing more: plain ``http://`` to this machine (the local server; where
a round trip crosses a network, it is not the client's CPU that counts, and a connection that hangs
is httpx's to time out and follow), no transport handed in (tests talk to an app in-process through
one), no proxy named in the environment (httpx honours ``*_PROXY``). A
request that may go again (nothing sent yet, or an idempotent one) and fails here is answered
``None``, for :class:`trainyard.sdk.http.Http` to send through httpx, which follows the leader and
names the failure as before; a POST that fails after it was sent, or any request that timed out
waiting for its answer, is the same :class:`~trainyard.errors.ServerUnavailable` that httpx's path
raises for it (:func:`trainyard.sdk.http.may_resend`: never sent twice).
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import select
import threading
from urllib.parse import urlsplit

from trainyard import errors

_PROXY_VARS = ("http_proxy", "all_proxy")


def plain_http_for(url: str) -> bool:
    """Whether requests to ``url`` may go through :class:`PlainConnection` (see the module's doc)."""
    parts = urlsplit(url)
    names = {k.lower() for k in os.environ}
    return parts.scheme == "http" and _loopback(parts.hostname or "") and not any(v in names for v in _PROXY_VARS)


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class PlainConnection:
    """Requests to one ``http://host:port``, one at a time (another thread's goes through httpx)."""

    def __init__(self, server: str, timeout: float) -> None:
        parts = urlsplit(server)
        self.server = server
        self._prefix = parts.path.rstrip("/")
        self._conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=timeout)
        self._timeout = timeout
        self._lock = threading.Lock()

    def close(self) -> None:
        self._conn.close()

    def call(self, method: str, target: str, body: bytes | None, headers: dict[str, str], *, idempotent: bool,
             timeout: float | None = None) -> tuple[int, bytes] | None:
        """``(status, body)`` of the answer; None where httpx should send it instead (see the module's doc).
        ``idempotent``: whether the request may go again once it may have reached the server."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            try:
                self._ready(timeout or self._timeout)
            except OSError:
                self._conn.close()
                return None  # no connection: nothing was sent
            try:
                self._conn.request(method, self._prefix + target, body=body, headers=headers)
                resp = self._conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as e:
                self._conn.close()
                if idempotent and not isinstance(e, TimeoutError):  # a slow server is not a gone one
                    return None
                raise errors.ServerUnavailable(f"cannot reach the trainyard server at {self.server}: {e}") from None
            if resp.will_close:
                self._conn.close()
            return resp.status, data
        finally:
            self._lock.release()

    def _ready(self, timeout: float) -> None:
        """A connection to send on: the kept one unless the server closed it while idle (readable
        means it sent its EOF: httpcore drops such a connection the same way), else a new one."""
        sock = self._conn.sock
        if sock is not None and select.select([sock], [], [], 0)[0]:
            self._conn.close()
            sock = None
        if sock is None:
            self._conn.timeout = timeout
            self._conn.connect()
        else:
            sock.settimeout(timeout)
