"""Signing in to ``/serve/NAME/`` pages, and to clusters' Dask dashboards (``/api/v1/clusters/ID/dashboard/``),
opened in a browser, which sends no ``Authorization`` header there.

The UI, once signed in, asks ``POST /api/v1/serve-session`` with its token; the answer sets this cookie to
that token's SHA-256, which the Guard takes on ``/serve/`` and dashboards for the token and nowhere else (the
API hashes what it is sent: a digest gets nothing there). Not the token itself: a browser sends a host's
cookies to every port of that host, where any team's job may listen, and a page there must not get a token that
acts as its visitor (it still gets what opens ``/serve/`` pages as them, until they sign out or the token is
revoked). ``HttpOnly`` (no page's script reads it), ``SameSite=Strict`` (no other site's page makes the browser
send it), ``Path=/serve/`` and a second one ``Path=/api/v1/clusters/`` (the rest of the API never takes it),
``Secure`` over HTTPS. A revoked token stops working in the cookie at once, as anywhere. The Guard takes it
only on those paths, only without an ``Authorization`` header, and against forged requests from a sibling site
(same-site but not same-origin), only for safe methods, or for others and WebSocket upgrades when ``Origin``
names this server. The proxies take it out of the ``Cookie`` header passed on. A browser navigating to such a
page without it is sent to the UI's sign-in page, which comes back to the page.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from trainyard.auth.tokens import token_hash

COOKIE = "trainyard_serve"
PATH = "/serve/"
DASHBOARDS = "/api/v1/clusters/"  # the second cookie's path; taken only on a dashboard's
_DASHBOARD = re.compile(r"/api/v1/clusters/[^/]+/dashboard/")
MAX_AGE = 7 * 24 * 3600  # seconds: the UI sets it again each time it loads
SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_VALUE = re.compile(r"[0-9a-f]{64}")  # a token's SHA-256, as the store keeps it


def set_cookie(token: str, secure: bool) -> list[str]:
    """The ``Set-Cookie`` values: one for ``/serve/``, one for the clusters' dashboards."""
    return [_cookie(token_hash(token), path, MAX_AGE, secure) for path in (PATH, DASHBOARDS)]


def clear_cookie(secure: bool) -> list[str]:
    return [_cookie("", path, 0, secure) for path in (PATH, DASHBOARDS)]


def _cookie(value: str, path: str, age: int, secure: bool) -> str:
    return f"{COOKIE}={value}; Path={path}; Max-Age={age}; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")


def signs_in(path: str) -> bool:
    """Whether the cookie counts on ``path``: a ``/serve/`` page or a cluster's dashboard."""
    return path.startswith(PATH) or _DASHBOARD.match(path) is not None


def cookie_digest(scope: dict, headers: dict[bytes, bytes]) -> str | None:
    """The token's SHA-256 in the sign-in cookie, where this request may be authenticated by it (see the module)."""
    raw = headers.get(b"cookie")
    if raw is None or not signs_in(scope["path"]):
        return None
    method = "GET" if scope["type"] == "websocket" else scope["method"]
    if (method not in SAFE or scope["type"] == "websocket") and not _same_origin(headers):
        return None
    for part in raw.decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and _VALUE.fullmatch(value):
            return value
    return None


def without_serve_cookie(raw: bytes) -> bytes:
    """A ``Cookie`` header without this server's sign-in cookie (b"" when it was the only one)."""
    if COOKIE.encode() not in raw:
        return raw
    kept = [p.strip() for p in raw.split(b";") if p.strip() and p.strip().partition(b"=")[0] != COOKIE.encode()]
    return b"; ".join(kept)


def sign_in_location(scope: dict) -> bytes:
    """Where a browser goes to sign in, and come back to this page (its path only: nothing secret)."""
    back = scope["path"] + ("?" + scope["query_string"].decode("latin-1") if scope.get("query_string") else "")
    return b"/login?next=" + quote(back, safe="/").encode()


def wants_page(scope: dict, headers: dict[bytes, bytes]) -> bool:
    """A browser navigating (GET of HTML), who is better sent to sign in than shown a 401."""
    return (scope["type"] == "http" and scope["method"] == "GET" and signs_in(scope["path"])
            and b"text/html" in headers.get(b"accept", b""))


def _same_origin(headers: dict[bytes, bytes]) -> bool:
    origin = headers.get(b"origin", b"").decode("latin-1").lower()
    host = headers.get(b"host", b"").decode("latin-1").lower()
    return bool(host) and origin.partition("://")[2] == host
