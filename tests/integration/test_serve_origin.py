"""A service's pages never act as the UI (api/serve_origin.py): on a server with users each answer of a service is
sandboxed into an origin of its own, a browser opening a ``/serve/`` address gets the frame page that shows it in a
sandboxed frame, and no service sets the server's sign-in cookie or widens a service worker, whichever way its
answer goes (the lane, or the usual way). Without users (one user owns every service) nothing is sandboxed."""

from __future__ import annotations

import httpx
import pytest

from tests.support.lane_server import AUTH, served, served_with_users, warm  # noqa: F401  (fixtures)
from trainyard.api.serve_origin import SANDBOX

pytestmark = pytest.mark.slow
SANDBOX_POLICY = SANDBOX[1].decode()


def _cookies(r: httpx.Response) -> list[str]:
    return r.headers.get_list("set-cookie")


@pytest.mark.parametrize("way", ["lane", "usual"])
def test_a_services_answer_is_sandboxed_and_sets_no_cookie_of_the_servers(served_with_users, way):
    url, lane, _, _ = served_with_users
    warm(url)
    taken = lane.taken
    headers = AUTH if way == "lane" else {**AUTH, "Cookie": "a=b"}  # a cookie sends it the usual way
    r = httpx.get(url + "/serve/echo/cookies", headers=headers)
    assert r.status_code == 200
    assert (lane.taken > taken) == (way == "lane")
    assert r.headers["content-security-policy"] == SANDBOX_POLICY
    assert "allow-same-origin" not in SANDBOX_POLICY
    assert _cookies(r) == ["session=abc; Path=/serve/echo/"]  # its own cookie, never the server's sign-in one
    assert "service-worker-allowed" not in r.headers
    big = httpx.get(url + "/serve/echo/stream?n=20", headers=headers)  # streamed (over the buffer): sandboxed too
    assert big.status_code == 200 and big.headers["content-security-policy"] == SANDBOX_POLICY


def test_a_browser_opening_a_services_address_gets_the_frame_page_and_its_frame_the_service(served_with_users):
    url, _, _, _ = served_with_users
    warm(url)
    opened = httpx.get(url + "/serve/echo/whoami?q=a+b%20c", headers={**AUTH, "Sec-Fetch-Dest": "document"})
    assert opened.status_code == 200 and opened.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/ui/serve_frame.js">' in opened.text
    assert opened.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in opened.headers["content-security-policy"]
    # the frame asks for the same address with the mark last; the replica sees the query as the browser sent it
    framed = httpx.get(url + "/serve/echo/whoami?q=a+b%20c&trainyard-frame=1", headers={**AUTH, "Sec-Fetch-Dest": "iframe"})
    assert framed.status_code == 200 and framed.json()["path"] == "/whoami?q=a+b%20c"
    assert framed.headers["content-security-policy"] == SANDBOX_POLICY
    alone = httpx.get(url + "/serve/echo/whoami?trainyard-frame=1", headers={**AUTH, "Sec-Fetch-Dest": "iframe"})
    assert alone.json()["path"] == "/whoami"
    # the frame page's script is the UI's own
    script = httpx.get(url + "/ui/serve_frame.js")
    assert script.status_code == 200 and "sandbox" in script.text


def test_without_users_nothing_is_sandboxed_but_the_sign_in_cookie_is_still_the_servers(served):
    url, _, _, _ = served
    warm(url)
    r = httpx.get(url + "/serve/echo/cookies", headers=AUTH)
    assert r.status_code == 200 and "content-security-policy" not in r.headers
    assert _cookies(r) == ["session=abc; Path=/serve/echo/"]
    page = httpx.get(url + "/serve/echo/whoami", headers={**AUTH, "Sec-Fetch-Dest": "document"})
    assert page.json()["path"] == "/whoami"  # the service's own answer, as before
