"""Signing in to ``/serve/NAME/`` pages opened in a browser, which sends no ``Authorization`` header there.

The UI, once signed in, asks ``POST /api/v1/serve-session`` with its token; the answer sets this cookie to
that token's SHA-256, which the Guard takes on ``/serve/`` for the token and nowhere else (the API hashes what
it is sent: a digest gets nothing there). Not the token itself: a browser sends a host's cookies to every port of
that host, where any team's job may listen, and a page there must not get a token that acts as its visitor (it
still gets what opens ``/serve/`` pages as them, until they sign out or the token is revoked).
``HttpOnly`` (no page's script reads it), ``SameSite=Strict`` (no other site's page makes the
browser send it), ``Path=/serve/`` (the API never accepts it), ``Secure`` over HTTPS. A revoked token stops
working in the cookie at once, as anywhere. The Guard takes it only on ``/serve/`` paths, only without an
``Authorization`` header, and against forged requests from a sibling site (same-site but not same-origin),
only for safe methods, or for others and WebSocket upgrades when ``Origin`` names this server. The proxy
takes it out of the ``Cookie`` header passed to the replica. A browser navigating to a ``/serve/`` page
without it is sent to the UI's sign-in page, which comes back to the page.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from trainyard.auth.tokens import token_hash

COOKIE = "trainyard_serve"
PATH = "/serve/"
MAX_AGE = 7 * 24 * 3600  # seconds: the UI sets it again each time it loads
SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_VALUE = re.compile(r"[0-9a-f]{64}")  # a token's SHA-256, as the store keeps it


def set_cookie(token: str, secure: bool) -> str:
    return (f"{COOKIE}={token_hash(token)}; Path={PATH}; Max-Age={MAX_AGE}; HttpOnly; SameSite=Strict"
            + ("; Secure" if secure else ""))


def clear_cookie(secure: bool) -> str:
    return f"{COOKIE}=; Path={PATH}; Max-Age=0; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")


def cookie_digest(scope: dict, headers: dict[bytes, bytes]) -> str | None:
    """The token's SHA-256 in the sign-in cookie, where this request may be authenticated by it (see the module)."""
    raw = headers.get(b"cookie")
    if raw is None or not scope["path"].startswith(PATH):
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
    return (scope["type"] == "http" and scope["method"] == "GET" and scope["path"].startswith(PATH)
            and b"text/html" in headers.get(b"accept", b""))


def _same_origin(headers: dict[bytes, bytes]) -> bool:
    origin = headers.get(b"origin", b"").decode("latin-1").lower()
    host = headers.get(b"host", b"").decode("latin-1").lower()
    return bool(host) and origin.partition("://")[2] == host
