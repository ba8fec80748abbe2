"""The door every request passes: a Host this server answers to, and the bearer token.

A pure ASGI middleware rather than a router dependency, so that it also
covers what FastAPI serves outside the routers (``/docs``, ``/redoc``,
``/openapi.json``) and costs a streaming response nothing.

- **Host.** A server on loopback answers only requests that name loopback:
  a web page on ``evil.example`` whose name a DNS server later points at
  127.0.0.1 (DNS rebinding) is refused before it reaches any route.
- **Token.** Every path but ``/healthz`` needs ``Authorization: Bearer
  <token>``. Launcher reports (``/internal/``) carry their attempt's own
  credential instead, checked where the report is applied.
"""

from __future__ import annotations

import json
from typing import Any

from trainyard.auth.tokens import bearer, matches
from trainyard.errors import AttemptUnauthorized, TrainyardError, Unauthorized

OPEN_PATHS = frozenset({"/healthz"})
OWN_AUTH_PREFIX = "/internal/"


class MisdirectedHost(TrainyardError):
    """This server does not answer to that Host."""

    code = "misdirected_host"
    http_status = 421


class Guard:
    def __init__(self, app: Any, *, token_sha256: str | None, allowed_hosts: tuple[str, ...] | None) -> None:
        self.app = app
        self.token_sha256 = token_sha256
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts) if allowed_hosts else None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        if self.allowed_hosts is not None and _hostname(headers.get(b"host")) not in self.allowed_hosts:
            return await _refuse(send, MisdirectedHost(), websocket=scope["type"] == "websocket")
        path = scope["path"]
        if self.token_sha256 is not None and path not in OPEN_PATHS:
            sent = bearer(_text(headers.get(b"authorization")))
            # a launcher's credential is checked with its report; here only that it brought one
            launcher = path.startswith(OWN_AUTH_PREFIX)
            if not (sent is not None if launcher else matches(sent, self.token_sha256)):
                return await _refuse(send, AttemptUnauthorized() if launcher else Unauthorized(),
                                     [(b"www-authenticate", b"Bearer")], websocket=scope["type"] == "websocket")
        return await self.app(scope, receive, send)


def _text(raw: bytes | None) -> str | None:
    return raw.decode("latin-1") if raw is not None else None


def _hostname(raw: bytes | None) -> str:
    """The name in a Host header, without its port (``[::1]:80`` → ``::1``)."""
    host = (_text(raw) or "").strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def _refuse(send: Any, error: TrainyardError, extra: list[tuple[bytes, bytes]] | None = None,
                  websocket: bool = False) -> None:
    if websocket:
        return await send({"type": "websocket.close", "code": 1008, "reason": error.message})
    body = json.dumps(error.to_dict()).encode()
    await send({"type": "http.response.start", "status": error.http_status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(extra or [])]})
    await send({"type": "http.response.body", "body": body})
