"""What keeps a service's pages from acting as the UI: ``/serve/NAME/`` shares the UI's origin, and a service's
answers are its owner's to write.

Same origin, a page of the service could read the token the UI keeps (``localStorage``) and call the API as whoever
opened it, register a service worker over the whole UI, or set the ``/serve/`` sign-in cookie to its owner's token.
So, on a server with users (``--auth``), every answer of a service carries ``Content-Security-Policy: sandbox``
without ``allow-same-origin``: the browser runs it in an origin of its own, which reaches none of the UI's storage,
cookies or workers. Its scripts then reach their service through the page that frames them: a browser opening a
``/serve/`` address gets the UI's frame page (:data:`FRAME_PAGE`), which shows the service's answer in a sandboxed
frame and relays the frame's requests to that service only (``ui/static/serve_bridge.js``); the UI's services page
does the same. Without ``--auth`` the one user owns every service and the token: nothing is sandboxed.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from trainyard.api.serve_cookie import COOKIE

SANDBOX = (b"content-security-policy", b"sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads")
# uvicorn adds its own Date and Server; a service may not widen a service worker's reach over the UI
_NEVER = frozenset({b"date", b"server", b"service-worker-allowed"})
_OUR_COOKIE = COOKIE.encode()
FRAME_MARK = b"trainyard-frame=1"  # the frame page's frame asks for its own address with this last in its query
FRAME_PAGE = Path(__file__).resolve().parents[1] / "ui" / "static" / "serve_frame.html"
_FRAME_HEADERS = [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-cache"),
                  (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'; base-uri 'none'"),
                  (b"x-frame-options", b"DENY"), (b"vary", b"sec-fetch-dest")]


def returned(headers: list[tuple[bytes, bytes]], hop: frozenset[bytes], sandboxed: bool) -> list[tuple[bytes, bytes]]:
    """The replica's answer headers that go on to the caller: not those of one hop (``hop``), and never a cookie
    named as this server's sign-in cookie (a service setting it would sign its visitors in as its owner)."""
    kept = [(k, v) for k, v in headers if k not in hop and k not in _NEVER
            and not (k == b"set-cookie" and v.partition(b"=")[0].strip() == _OUR_COOKIE)]
    if sandboxed:
        kept.append(SANDBOX)
    return kept


def is_navigation(headers: dict[bytes, bytes], method: str) -> bool:
    """A browser opening a page in its window (Fetch Metadata), which gets the frame page instead."""
    return method == "GET" and headers.get(b"sec-fetch-dest") == b"document"


def without_mark(query: bytes) -> bytes:
    """The query the replica gets: the frame page's mark taken off its end."""
    while query.endswith(FRAME_MARK):
        query = query[:-len(FRAME_MARK)].removesuffix(b"&")
    return query


@cache
def frame_page() -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Its headers and body, read once (a shipped file)."""
    body = FRAME_PAGE.read_bytes()
    return [*_FRAME_HEADERS, (b"content-length", b"%d" % len(body))], body
