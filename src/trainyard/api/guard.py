"""The door every request passes: a Host this server answers to, and who sent it.

A pure ASGI middleware rather than a router dependency, so that it also
covers what FastAPI serves outside the routers (``/docs``, ``/redoc``,
``/openapi.json``) and costs a streaming response nothing.

- **Host.** A server on loopback answers only requests that name loopback:
  a web page on ``evil.example`` whose name a DNS server later points at
  127.0.0.1 (DNS rebinding) is refused before it reaches any route.
- **Token.** Every path but ``/healthz`` and the web UI's shell and assets (no data) needs ``Authorization: Bearer
  <token>``: the server's own token (the local admin, compared in memory)
  or, with ``--auth``, a user's API token (one indexed lookup, in a worker
  thread, its answer reused for two seconds); on ``/serve/`` pages, a browser's sign-in cookie instead
  (``api/serve_cookie.py``), and a browser navigating there without one is sent to sign in. The caller
  found is left in the scope for the routes
  (:data:`CALLER_KEY`). Launcher reports (``/internal/``) carry their
  attempt's own credential instead, checked where the report is applied.
- **Body.** With ``max_body``, a request whose body is larger is refused (413) before a byte of it is held, or,
  sent chunked, once it passes the bound; code uploads (``PUT /api/v1/snapshots/``, spooled to disk as they
  come) are not bounded. Routes read JSON bodies whole: without this, anyone could make the server hold a
  body of any size with a made-up launcher credential, as a report's is checked only with the report.
"""

from __future__ import annotations

import json
from typing import Any, Protocol
from urllib.parse import parse_qsl

from anyio.to_thread import run_sync

from trainyard.api.serve_cookie import PATH as SERVE_PATH, cookie_digest, sign_in_location, wants_page
from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.auth.tokens import bearer, token_hash
from trainyard.errors import AttemptUnauthorized, BodyTooLarge, InvalidSpec, TrainyardError, Unauthorized
from trainyard.ui import is_page

OPEN_PATHS = frozenset({"/healthz"})
MAX_BODY = 16 << 20  # a launcher's report carries at most 1 MiB of log and 1 MiB of metrics, JSON-escaped
UPLOADS = "/api/v1/snapshots/"  # PUT: streamed to disk, not held
OWN_AUTH_PREFIX = "/internal/"
CALLER_KEY = "trainyard.caller"


class Authenticator(Protocol):
    """Who a token stands for, asked by its SHA-256 (what a ``/serve/`` sign-in cookie holds)."""

    def server_hash(self, digest: str) -> bool: ...
    def remembered(self, digest: str) -> Caller | None: ...
    def hash_owner(self, digest: str) -> Caller | None: ...


class MisdirectedHost(TrainyardError):
    """This server does not answer to that Host."""

    code = "misdirected_host"
    http_status = 421


class Guard:
    def __init__(self, app: Any, *, identity: Authenticator, required: bool, users: bool,
                 allowed_hosts: tuple[str, ...] | None, max_body: int | None = None) -> None:
        """``required``: a token is needed at all; ``users``: users' API tokens are looked up too; ``max_body``:
        the largest request body taken (None: any, as ``/serve/`` passes bodies on as they come)."""
        self.app = app
        self.max_body = max_body
        self.identity = identity
        self.required = required
        self.users = users
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts) if allowed_hosts else None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        websocket = scope["type"] == "websocket"
        if not self.answers(headers.get(b"host")):
            return await _refuse(send, MisdirectedHost(), websocket=websocket)
        path = scope["path"]
        if self.max_body is not None and not websocket and not (scope["method"] == "PUT" and path.startswith(UPLOADS)):
            length = headers.get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body):
                # answered now; what comes of the body is dropped as it comes (uvicorn), so a client that sends it
                # all before it reads (httpx) gets this answer instead of a reset connection
                return await _refuse(send, _too_large(self.max_body))
            if length is None and b"transfer-encoding" in headers:
                receive = _bounded(receive, self.max_body)
        caller: Caller | None = LOCAL_ADMIN
        if self.required and path not in OPEN_PATHS and not is_page(path):
            sent = bearer(_text(headers.get(b"authorization")))
            if path.startswith(OWN_AUTH_PREFIX):  # a launcher's credential is checked with its report
                if sent is None:
                    return await _refuse(send, AttemptUnauthorized(), _CHALLENGE, websocket=websocket)
            else:
                digest = token_hash(sent) if sent is not None else None
                if b"authorization" not in headers:
                    digest = cookie_digest(scope, headers)
                caller = await self._caller(digest)
                if caller is None:
                    if b"authorization" not in headers and wants_page(scope, headers):
                        return await _redirect(send, sign_in_location(scope))
                    return await _refuse(send, Unauthorized(), _CHALLENGE, websocket=websocket)
        # PostgreSQL refuses a NUL in any text: a 500 on most routes. Asked once the sender is known (a stranger
        # gets 401 as anywhere), and before a launcher's credential is checked with its report
        if (nul := _nul_in(scope)) is not None:
            place = "url" if nul == "path" else "query"  # "invalid request path: …", "invalid query parameter q: …"
            return await _refuse(send, InvalidSpec.parameter(nul, "holds a NUL byte", place), websocket=websocket)
        client = scope.get("client")
        scope[CALLER_KEY] = caller.at(client[0]) if client else caller
        return await self.app(scope, receive, send)

    def answers(self, host: bytes | None) -> bool:
        """Whether this server answers to the name in a Host header."""
        return self.allowed_hosts is None or _hostname(host) in self.allowed_hosts

    def caller_now(self, authorization: bytes | None) -> Caller | None:
        """The caller of a request to a path that needs a token, where that is known without a database read:
        the server's own token, or a user's token looked up in the last seconds. None otherwise (no token,
        a wrong one, or one to look up), which only :meth:`__call__` can settle (api/serve_lane.py)."""
        if not self.required:
            return LOCAL_ADMIN
        sent = bearer(_text(authorization))
        if sent is None:
            return None
        digest = token_hash(sent)
        if self.identity.server_hash(digest):
            return LOCAL_ADMIN
        return self.identity.remembered(digest) if self.users else None

    async def _caller(self, digest: str | None) -> Caller | None:
        """Who the token of SHA-256 ``digest`` stands for."""
        if digest is None:
            return None
        if self.identity.server_hash(digest):
            return LOCAL_ADMIN
        if not self.users:
            return None
        # a token seen in the last seconds needs no lookup; otherwise a database read, off the event loop
        return self.identity.remembered(digest) or await run_sync(self.identity.hash_owner, digest)


_CHALLENGE = [(b"www-authenticate", b"Bearer")]


def _too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(f"the request body is larger than {limit >> 20} MiB", limit=limit)


def _bounded(receive: Any, limit: int) -> Any:
    """``receive``, raising :class:`BodyTooLarge` (answered 413 by the app's handler) once the body passes
    ``limit``."""
    seen = 0

    async def bounded() -> dict:
        nonlocal seen
        message = await receive()
        seen += len(message.get("body", b""))
        if seen > limit:
            raise _too_large(limit)
        return message

    return bounded


def _nul_in(scope: dict) -> str | None:
    """Where a request's path or query holds a NUL: ``path``, or the query parameter's name; None if nowhere,
    and for ``/serve/`` (a service's own addresses, for it to read)."""
    path, query = scope["path"], scope.get("query_string", b"")
    if path.startswith(SERVE_PATH) or ("\x00" not in path and b"%00" not in query and b"\x00" not in query):
        return None
    if "\x00" in path:
        return "path"
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return name.replace("\x00", "\\x00") or "query"
    return "query"


def _text(raw: bytes | None) -> str | None:
    return raw.decode("latin-1") if raw is not None else None


def _hostname(raw: bytes | None) -> str:
    """The name in a Host header, without its port (``[::1]:80`` → ``::1``)."""
    host = (_text(raw) or "").strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def _redirect(send: Any, location: bytes) -> None:
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location), (b"content-length", b"0"), (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Any, error: TrainyardError, extra: list[tuple[bytes, bytes]] | None = None,
                  websocket: bool = False) -> None:
    if websocket:
        return await send({"type": "websocket.close", "code": 1008, "reason": error.message})
    body = json.dumps(error.to_dict()).encode()
    await send({"type": "http.response.start", "status": error.http_status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(extra or [])]})
    await send({"type": "http.response.body", "body": body})
