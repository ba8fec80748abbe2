"""The browser's sign-in cookie for /serve/ pages: when the Guard may take it, and that it never reaches a replica."""

from trainyard.api.serve_cookie import (COOKIE, clear_cookie, cookie_digest, set_cookie, sign_in_location, wants_page,
                                        without_serve_cookie)
from trainyard.api.serve_hop import forward_headers
from trainyard.auth.tokens import token_hash

HOST = b"127.0.0.1:8080"
DIGEST = token_hash("tok-en_1")


def scope(method="GET", path="/serve/digits/", kind="http", query=b""):
    return {"type": kind, "method": method, "path": path, "query_string": query, "scheme": "http",
            "client": ("10.0.0.9", 5555), "headers": []}


def headers(origin=None, cookie=f"a=1; {COOKIE}={DIGEST}; b=2"):
    h = {b"host": HOST, b"cookie": cookie.encode()}
    if origin:
        h[b"origin"] = origin.encode()
    return h


def test_the_cookie_is_taken_for_safe_methods_and_for_others_only_from_this_origin():
    assert cookie_digest(scope(), headers()) == DIGEST
    assert cookie_digest(scope("HEAD"), headers()) == DIGEST
    assert cookie_digest(scope("POST"), headers()) is None  # a form posted from elsewhere sends no Origin of ours
    assert cookie_digest(scope("POST"), headers("http://evil.example")) is None
    assert cookie_digest(scope("POST"), headers("http://127.0.0.1:8080.evil.example")) is None
    assert cookie_digest(scope("POST"), headers("http://127.0.0.1:8080")) == DIGEST
    assert cookie_digest(scope(kind="websocket"), headers()) is None  # a WebSocket needs our Origin too
    assert cookie_digest(scope(kind="websocket"), headers("http://127.0.0.1:8080")) == DIGEST


def test_the_cookie_counts_only_under_serve_and_only_as_a_digest():
    assert cookie_digest(scope(path="/api/v1/jobs"), headers()) is None
    assert cookie_digest(scope(), headers(cookie=f"{COOKIE}=tok-en_1")) is None
    assert cookie_digest(scope(), headers(cookie="other=1")) is None
    assert cookie_digest(scope(), {b"host": HOST}) is None


def test_the_cookie_is_http_only_strict_and_scoped_to_serve_and_the_clusters():
    served, clusters = set_cookie("t0k", secure=False)
    # the token's digest, never the token: the browser sends it to every port of this host
    assert served.startswith(f"{COOKIE}={token_hash('t0k')};") and "Path=/serve/" in served
    assert clusters.startswith(f"{COOKIE}={token_hash('t0k')};") and "Path=/api/v1/clusters/" in clusters
    for made in (served, clusters):
        assert "HttpOnly" in made and "SameSite=Strict" in made and "Secure" not in made
    assert all(c.endswith("; Secure") for c in set_cookie("t0k", secure=True))
    assert all("Max-Age=0" in c for c in clear_cookie(secure=False))


def test_on_the_clusters_path_the_cookie_counts_only_for_a_dashboard():
    dashboard = "/api/v1/clusters/c-1/dashboard/status"
    assert cookie_digest(scope(path=dashboard), headers()) == DIGEST
    assert cookie_digest(scope(path=dashboard + "/ws", kind="websocket"), headers("http://127.0.0.1:8080")) == DIGEST
    assert cookie_digest(scope(path=dashboard + "/ws", kind="websocket"), headers("http://evil.example")) is None
    assert cookie_digest(scope(path="/api/v1/clusters/c-1"), headers()) is None
    assert cookie_digest(scope("POST", "/api/v1/clusters/c-1/scale"), headers("http://127.0.0.1:8080")) is None
    assert cookie_digest(scope(path="/api/v1/clusters/c-1/x/dashboard/"), headers()) is None
    assert wants_page(scope(path=dashboard), {b"accept": b"text/html"})


def test_the_replica_gets_the_callers_other_cookies_but_never_the_sign_in_one():
    assert without_serve_cookie(f"a=1; {COOKIE}=x; b=2".encode()) == b"a=1; b=2"
    assert without_serve_cookie(f"{COOKIE}=x".encode()) == b""
    assert without_serve_cookie(b"a=1") == b"a=1"
    sent = scope()
    sent["headers"] = [(b"host", HOST), (b"cookie", f"{COOKIE}=x".encode()), (b"accept", b"*/*")]
    forwarded = dict(forward_headers(sent, "digits", frozenset({b"host"})))
    assert b"cookie" not in forwarded and forwarded[b"accept"] == b"*/*"


def test_a_browser_navigating_without_a_session_is_sent_to_sign_in_and_back():
    page = {b"accept": b"text/html,application/xhtml+xml"}
    assert wants_page(scope(), page) and not wants_page(scope(), {b"accept": b"application/json"})
    assert not wants_page(scope("POST"), page)
    assert sign_in_location(scope(path="/serve/digits/v2 x", query=b"a=1&b=2")) == \
        b"/login?next=/serve/digits/v2%20x%3Fa%3D1%26b%3D2"
