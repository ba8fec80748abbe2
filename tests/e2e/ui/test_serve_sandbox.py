"""A service's page, written by its owner, seen by an admin on a server with users, in a real browser: shown in the
UI's services page or opened at its address, it runs in an origin of its own and gets neither the admin's token,
nor the API, nor a service worker over the UI; through the page framing it, it reaches its own service only."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import PY
from tests.support.browser import named_frame, open_signed_in, serve_cookie

pytestmark = pytest.mark.slow
EVIL = str(Path(__file__).resolve().parents[2] / "support" / "page_replica.py")


def _results(frame) -> dict:  # noqa: ANN001
    expect(frame.locator("#result")).not_to_have_text("waiting", timeout=30_000)
    return json.loads(frame.inner_text("#result"))


def _assert_contained(got: dict, token: str) -> None:
    assert got["origin"] == "null"
    assert token not in json.dumps(got)
    for what in ("token", "cookie", "parent_token"):
        assert str(got[what]).startswith("denied: "), (what, got[what])
    assert got["api"] != 200 and got["worker"] != "registered"
    assert got["bridge_api"]["error"] == "only /serve/evil/ is reachable from here"
    assert got["bridge_climb"]["error"] == "only /serve/evil/ is reachable from here"
    own = got["bridge_own"]
    assert own["status"] == 200, own
    seen = json.loads(own["body"])
    assert seen["path"] == "/whoami?via=bridge" and "authorization" not in {k.lower() for k in seen["headers"]}


def test_a_services_page_reaches_neither_the_viewers_token_nor_the_api(auth_server, page):
    # a "model server" by its command's words, so that the UI embeds its page
    client = auth_server.client()
    client.services.apply({"name": "evil", "command": [PY, EVIL, "trainyard.serving.model_server"],
                           "resources": {"cpu": 0.5}, "service": {"replicas": 1, "readiness": {"path": "/whoami"}}})
    client.services.wait_ready("evil", 1, timeout=60)

    # shown in the services page's try frame
    open_signed_in(page, auth_server.url, auth_server.token, "/services/evil")
    frame = named_frame(page, "try")
    assert page.get_attribute("iframe[name=try]", "sandbox") is not None
    _assert_contained(_results(frame), auth_server.token)

    # opened at its address: the frame page, the service's page in its frame
    page.goto(auth_server.url + "/serve/evil/")
    framed = page.frame_locator("iframe[sandbox]")
    expect(framed.locator("#result")).not_to_have_text("waiting", timeout=30_000)
    inner = next(f for f in page.frames if f.parent_frame is not None)
    _assert_contained(_results(inner), auth_server.token)
    assert page.evaluate("navigator.serviceWorker.getRegistrations().then((r) => r.length)") == 0
    # the UI itself is framed by no page
    assert page.goto(auth_server.url + "/jobs").headers["x-frame-options"] == "DENY"


class _Sibling(BaseHTTPRequestHandler):
    """A page on another port of the server's host (where any team's job may listen): it asks its own /serve/
    path, to which the browser sends the cookies the UI's port set, and keeps what came."""

    got: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        if self.headers.get("cookie"):
            self.got.append(self.headers["cookie"])
        body = b"<script>fetch('/serve/x').then(() => { document.title = 'asked'; })</script>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass


def test_a_page_on_another_port_of_the_host_gets_no_token_from_the_serve_cookie(auth_server, page):
    # given an admin signed in to the UI, which set their /serve/ sign-in cookie
    admin = (auth_server.home / "first-admin-token").read_text().strip()
    open_signed_in(page, auth_server.url, admin, "/jobs")
    serve_cookie(page)
    sibling = ThreadingHTTPServer(("127.0.0.1", 0), _Sibling)
    threading.Thread(target=sibling.serve_forever, daemon=True).start()
    try:
        # when they open a page on another port of the same host
        page.goto(f"http://127.0.0.1:{sibling.server_address[1]}/")
        expect(page).to_have_title("asked")
    finally:
        sibling.shutdown()
    # then its server got the cookie (a browser keeps cookies by host, not port), but nothing that acts as the admin
    stolen = _Sibling.got[-1].partition("=")[2]
    assert stolen and admin not in stolen
    as_thief = {"Authorization": f"Bearer {stolen}"}
    assert httpx.get(auth_server.url + "/api/v1/whoami", headers=as_thief).status_code == 401
