"""The web UI's shell: served by the server itself at every page path, without a token (it holds no
data), signing in with a token, and the API's own paths never answered with the shell."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.support.browser import LINK_SIGNIN, open_signed_in


def test_pages_are_served_without_a_token_and_data_is_not(server):
    for path in ("/", "/jobs/abc?status=running", "/pipelines", "/sweeps/abc", "/ui/app.js", "/ui/style.css",
                 "/ui/pages/sweeps.js", "/ui/sweeps.css"):
        r = httpx.get(server.url + path)
        assert r.status_code == 200, (path, r.status_code)
    assert "text/html" in httpx.get(server.url + "/queues").headers["content-type"]
    assert httpx.get(server.url + "/api/v1/jobs").status_code == 401
    # the API's own paths keep their JSON errors: a typo is not answered with a page
    r = httpx.get(server.url + "/api/v1/no-such-thing", headers=server.headers)
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/json")
    assert httpx.get(server.url + "/ui/no-such-asset.js").status_code == 404


def test_the_token_in_the_address_signs_in_and_leaves_the_address_bar(server, page):
    open_signed_in(page, server.url, server.token, "/login")
    page.wait_for_function("document.getElementById('who').textContent.length > 0")
    assert "token" not in page.url
    assert page.evaluate("localStorage.getItem('trainyard.token')") == server.token


def test_a_page_without_a_token_asks_for_one_and_a_pasted_token_signs_in(server, page):
    page.goto(server.url + "/login?next=/nodes")
    page.fill("input[name=token]", "not-a-token")
    page.click("button[type=submit]")
    page.wait_for_selector(".toast")
    assert "not valid" in page.inner_text("#toasts")
    page.fill("input[name=token]", server.token)
    page.click("button[type=submit]")
    # (not wait_for_url("**/nodes"): the sign-in page's own address, /login?next=/nodes, matches that)
    page.wait_for_function("location.pathname === '/nodes' && document.getElementById('who').textContent")
    assert page.inner_text("#who") == "local"


def test_trainyard_ui_gives_the_address_that_signs_in(server, page):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "trainyard", "ui", "--no-browser"], env=server.env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    url = out.stdout.strip()
    assert url.startswith(server.url + "/#token=")
    page.goto(url)
    # one click: the page names whom the link signs in as before it keeps the token (test_link_signin.py)
    assert page.locator(f"{LINK_SIGNIN} h2").inner_text().startswith("Sign in as local")
    page.locator(f"{LINK_SIGNIN} button[value=confirm]").click()
    page.wait_for_function("document.getElementById('who').textContent.length > 0")
    assert page.inner_text("#who") == "local" and "token" not in page.url


def test_trainyard_ui_gives_the_browser_a_private_file_not_the_token(server, page, tmp_path):
    import stat
    import subprocess
    import sys

    seen = tmp_path / "argv"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}\n')
    browser.chmod(0o755)
    out = subprocess.run([sys.executable, "-m", "trainyard", "ui"], env={**server.env, "BROWSER": f"{browser} %s"},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    [arg] = seen.read_text().split()
    # what every user of the machine may read (/proc/PID/cmdline) names a file, never the token
    assert server.token not in arg and arg.startswith("file://")
    opened = Path(arg.removeprefix("file://"))
    assert stat.S_IMODE(opened.stat().st_mode) == 0o600 and opened.stat().st_uid == os.getuid()
    page.goto(arg)
    page.locator(f"{LINK_SIGNIN} button[value=confirm]").click()
    page.wait_for_function("document.getElementById('who') && document.getElementById('who').textContent.length > 0")
    assert page.inner_text("#who") == "local" and "token" not in page.url and page.url.startswith(server.url)


def test_signing_out_clears_the_serve_cookie_forgets_the_token_and_shows_the_sign_in(server, page):
    from tests.support.waiting import until

    def serve_cookie():
        return [c for c in page.context.cookies() if c["name"] == "trainyard_serve"]

    def open_serve_page():  # as a browser navigating there would: the cookie is its only credential
        return page.request.get(server.url + "/serve/nothing/", headers={"Accept": "text/html"}, max_redirects=0)

    # given a signed-in page, which has set the cookie /serve/ pages open with
    open_signed_in(page, server.url, server.token, "/nodes")
    page.wait_for_function("document.getElementById('who').textContent.length > 0")
    until(serve_cookie)
    assert open_serve_page().status == 404  # let in: only the service is missing
    # when the user signs out
    page.click("#signout")
    # then the sign-in form shows, the token is forgotten and the header names nobody
    page.wait_for_selector("form.login input[name=token]")
    assert page.evaluate("location.pathname") == "/login"
    assert page.evaluate("localStorage.getItem('trainyard.token')") is None
    assert page.inner_text("#who") == "" and not page.is_visible("#signout")
    # and the cookie is gone: a /serve/ page sends the browser to sign in
    until(lambda: not serve_cookie())
    gone = open_serve_page()
    assert gone.status == 303 and gone.headers["location"].startswith("/login?next=/serve/nothing/")
