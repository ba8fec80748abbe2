"""A link that carries an API token (`trainyard ui` opens one, and anyone can write one) signs the browser in only
once the person has seen whose token it is and said yes: a link on another site would otherwise sign its visitors
in as its writer, whose team then gets what they upload, submit or store as secrets."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browser import LINK_SIGNIN, held_token, open_signed_in, signed_in

pytestmark = pytest.mark.slow


def _user(srv, name: str, team: str) -> str:  # noqa: ANN001
    """A new member of ``team``; their token."""
    admin = (srv.home / "first-admin-token").read_text().strip()
    made = srv.cli("admin", "user", "create", name, "--team", team, "--role", "member", env={"TRAINYARD_TOKEN": admin})
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


def _history(page) -> list[str]:  # noqa: ANN001
    """Every address in the tab's history, back and forward (Chromium's own list)."""
    cdp = page.context.new_cdp_session(page)
    try:
        return [e["url"] for e in cdp.send("Page.getNavigationHistory")["entries"]]
    finally:
        cdp.detach()


def test_a_link_names_whose_token_it_carries_and_signs_in_only_once_confirmed(auth_server, page):
    # given a browser that holds no token, and a link that carries alice's
    alice = _user(auth_server, "alice", "vision")
    # when it is opened
    page.goto(signed_in(auth_server.url, alice, "/jobs"))
    # then the page names whom it would sign in as, and keeps nothing while it asks
    asking = page.locator(LINK_SIGNIN)
    expect(asking.locator("h2")).to_have_text("Sign in as alice (team vision)?")
    expect(asking).to_contain_text("This link came with an API token")
    assert held_token(page, auth_server.url) is None
    assert page.inner_text("#who") == ""
    assert not any(alice in url for url in [page.url, *_history(page)])
    # and once the person confirms, the page is signed in as alice
    asking.locator("button[value=confirm]").click()
    expect(page.locator("#who")).to_have_text("alice")
    expect(page.locator("#signout")).to_be_visible()
    assert held_token(page, auth_server.url) == alice
    assert page.evaluate("location.pathname") == "/jobs"


def test_a_declined_link_leaves_the_browser_signed_out_and_its_token_nowhere(auth_server, page):
    # given a link with alice's token, opened in a browser that holds none
    alice = _user(auth_server, "alice", "vision")
    page.goto(signed_in(auth_server.url, alice, "/secrets"))
    # when the person declines
    page.locator(f"{LINK_SIGNIN} button[value=decline]").click()
    # then the sign-in page shows, nothing was kept, and neither the address bar nor the history has the token
    page.wait_for_selector("form.login input[name=token]")
    assert page.evaluate("location.pathname") == "/login"
    assert held_token(page, auth_server.url) is None
    assert page.inner_text("#who") == ""
    urls = _history(page)
    assert any(url.startswith(auth_server.url + "/secrets") for url in urls)
    assert not any(alice in url or "token=" in url for url in urls), urls


def test_a_link_whose_token_the_server_does_not_take_says_so_and_keeps_nothing(auth_server, page):
    page.goto(signed_in(auth_server.url, "ty_made-up", "/jobs"))
    expect(page.locator(".toast.error", has_text="not valid on this server")).to_be_visible()
    page.wait_for_selector("form.login input[name=token]")
    expect(page.locator(LINK_SIGNIN)).to_have_count(0)
    assert held_token(page, auth_server.url) is None and "token" not in page.url


def test_a_link_replacing_the_browsers_sign_in_names_both_and_asks(auth_server, page):
    # given a browser signed in as bob, and a link with alice's token
    alice, bob = _user(auth_server, "alice", "vision"), _user(auth_server, "bob", "nlp")
    open_signed_in(page, auth_server.url, bob, "/jobs")
    expect(page.locator("#who")).to_have_text("bob")
    page.goto("about:blank")  # a new page load: the same path with another token in its fragment would not be one
    page.goto(signed_in(auth_server.url, alice, "/jobs"))
    # when asked, the person sees who they are and who they would become; declined, bob stays
    asking = page.locator(LINK_SIGNIN)
    expect(asking.locator("h2")).to_have_text("Sign in as alice (team vision)?")
    expect(asking).to_contain_text("signed in as bob (team nlp) now")
    asking.locator("button[value=decline]").click()
    expect(page.locator("#who")).to_have_text("bob")
    assert held_token(page, auth_server.url) == bob
    # confirmed, alice it is; and the same link again asks nothing
    page.goto("about:blank")
    page.goto(signed_in(auth_server.url, alice, "/jobs"))
    page.locator(f"{LINK_SIGNIN} button[value=confirm]").click()
    expect(page.locator("#who")).to_have_text("alice")
    page.goto("about:blank")
    page.goto(signed_in(auth_server.url, alice, "/nodes"))
    expect(page.locator("#who")).to_have_text("alice")
    expect(page.locator(LINK_SIGNIN)).to_have_count(0)
    assert held_token(page, auth_server.url) == alice
