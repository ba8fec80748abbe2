"""The account and users pages in a real browser against a real server with users: an admin adds a user, whose first
token (shown once) signs in, puts them in a team, disables and enables them, revokes a token, and reads it all in the
audit log; a member makes a token of their own, sees it once, revokes it, and is told the users page is an admin's.
Every effect is checked through the API with the tokens themselves."""

from __future__ import annotations

import datetime as dt
import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in, screenshot

pytestmark = pytest.mark.slow


def whoami(server, token: str) -> httpx.Response:  # noqa: ANN001
    return httpx.get(server.url + "/api/v1/whoami", headers={"Authorization": f"Bearer {token}"}, timeout=30)


def shown_secret(page) -> str:  # noqa: ANN001
    secret = page.inner_text("div.new-token code[data-copy=token]")
    assert re.fullmatch(r"[A-Za-z0-9_-]{20,}", secret), secret
    return secret


def never_kept(page, secret: str) -> None:  # noqa: ANN001
    assert secret not in page.evaluate("JSON.stringify([localStorage, sessionStorage, document.cookie])")


def test_an_admin_adds_a_user_puts_them_in_teams_disables_them_and_revokes_their_token(auth_server, page):
    answers: list[str] = []  # what the next prompts are answered; the confirmations before a disable or revoke: yes
    page.on("dialog", lambda d: d.accept(answers.pop(0) if d.type == "prompt" else None))
    admin = (auth_server.home / "first-admin-token").read_text().strip()
    # given the first admin on the users page, reached from the header's link an admin alone is shown
    open_signed_in(page, auth_server.url, admin, "/")
    page.locator("#nav a[data-nav=users]").click()
    expect(page.locator("#nav a[data-nav=users]")).to_have_class("active")
    expect(page.locator("table.users tr[data-user=admin] button[name=disable]")).to_be_disabled()  # not their own

    # when they add carol to team vision as a member
    form = page.locator("form.add-user")
    form.locator("input[name=name]").fill("carol")
    form.locator("input[name=team]").fill("vision")
    form.locator("button[type=submit]").click()
    # then carol's first token is shown once, with the address that signs her in, and it is carol's
    expect(form.locator("li.ok")).to_have_text("✓ user carol added")
    carol = shown_secret(page)
    assert page.inner_text("div.new-token code[data-copy=link]") == f"{auth_server.url}/#token={carol}"
    me = whoami(auth_server, carol).json()
    expect(page.locator(f"table.tokens tr[data-token='{me.pop('token')}']")).to_have_attribute("data-user", "carol")
    assert me == {"user": "carol", "admin": False, "teams": {"vision": "member"}, "users": True}
    expect(page.locator("table.users tr[data-user=carol] td.teams")).to_have_text("vision (member)")
    never_kept(page, carol)

    # a team that does not exist is refused where it was asked for; once added, carol joins it as a viewer
    team = page.locator("form.membership")
    team.locator("input[name=member]").fill("carol")
    team.locator("input[name=team]").fill("nlp")
    team.locator("select[name=role]").select_option("viewer")
    team.locator("button[type=submit]").click()
    expect(team.locator("li.error")).to_contain_text("nlp")
    page.fill("form.add-team input[name=team]", "nlp")
    page.click("form.add-team button[type=submit]")
    expect(page.locator("form.add-team li.ok")).to_have_text("✓ team nlp added")
    team.locator("button[type=submit]").click()
    expect(team.locator("li.ok")).to_have_text("✓ carol is a viewer of nlp")
    assert whoami(auth_server, carol).json()["teams"] == {"vision": "member", "nlp": "viewer"}
    expect(page.locator("table.users tr[data-user=carol] td.teams")).to_have_text("nlp (viewer), vision (member)")
    expect(page.locator("tr[data-team=nlp] td.members")).to_have_text("carol (viewer)")

    # her jobs' Unix account: one this machine lacks is refused, naming the field; one it has is set
    answers[:] = ["nosuchaccount"]
    page.click("table.users tr[data-user=carol] button[name=account]")
    expect(page.locator("ul.people-said li.error[data-field=os_user]")).to_contain_text("no account 'nosuchaccount'")
    answers[:] = ["nobody"]
    page.click("table.users tr[data-user=carol] button[name=account]")
    expect(page.locator("table.users tr[data-user=carol] td.account .mono")).to_have_text("nobody")
    assert httpx.get(auth_server.url + "/api/v1/users/carol", headers={"Authorization": f"Bearer {admin}"},
                     timeout=30).json()["os_user"] == "nobody"

    # when carol is disabled her token is refused; enabled, it works again
    page.click("table.users tr[data-user=carol] button[name=disable]")
    expect(page.locator("table.users tr[data-user=carol] td.state")).to_have_text("disabled")
    assert whoami(auth_server, carol).status_code == 401
    page.click("table.users tr[data-user=carol] button[name=enable]")
    expect(page.locator("table.users tr[data-user=carol] td.state")).to_have_text("active")
    assert whoami(auth_server, carol).status_code == 200
    screenshot(page, "users")

    # when her token is revoked from everyone's tokens, it is refused for good
    row = page.locator("table.tokens tr[data-user=carol][data-name=first]")
    row.locator("button[name=revoke]").click()
    expect(row.locator("td.state")).to_have_text("revoked")
    expect(row.locator("button[name=revoke]")).to_have_count(0)
    assert whoami(auth_server, carol).status_code == 401
    # and the audit log shows each change, newest first, by the admin
    audit = page.locator("table.audit tbody tr")
    expect(audit.first.locator("td").nth(2)).to_have_text("token.revoke")
    actions = [a.strip() for a in audit.locator("td:nth-child(3)").all_inner_texts()]
    for action in ("user.create", "team.create", "user.membership", "user.account", "user.disable", "user.enable",
                   "token.revoke"):
        assert action in actions, actions


def test_a_member_makes_a_token_sees_it_once_revokes_it_and_finds_the_users_page_an_admins(auth_server, page):
    page.on("dialog", lambda d: d.accept())
    made = httpx.post(auth_server.url + "/api/v1/users", headers=auth_server.headers, timeout=30,
                      json={"name": "dave", "team": "vision", "role": "member"})
    dave = made.json()["token"]["secret"]
    # given dave signed in, opening his account from his name in the header
    open_signed_in(page, auth_server.url, dave, "/")
    expect(page.locator("#who")).to_have_text("dave")
    page.click("#who")
    page.wait_for_url("**/account")
    expect(page.locator("dd[data-key=teams]")).to_have_text("vision (member)")
    expect(page.locator("#nav a[data-nav=users]")).to_be_hidden()

    # when he makes a token for his laptop that expires in 30 days
    page.fill("form.token-form input[name=name]", "laptop")
    page.select_option("form.token-form select[name=expires]", "30")
    page.click("form.token-form button[type=submit]")
    # then it is shown once, it acts as dave, and it is listed with its expiry
    laptop = shown_secret(page)
    assert whoami(auth_server, laptop).json()["user"] == "dave"
    row = page.locator("table.tokens tr[data-name=laptop]")
    soon = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=30)
    expect(row.locator("td.expires")).to_have_text(re.compile(
        "|".join((soon + dt.timedelta(days=d)).strftime("%Y-%m-%d") for d in (-1, 0))))
    expect(row.locator("td.state")).to_have_text("active")
    never_kept(page, laptop)
    screenshot(page, "account")
    # a second token of that name is refused, naming the field
    page.fill("form.token-form input[name=name]", "laptop")
    page.click("form.token-form button[type=submit]")
    expect(page.locator("form.token-form li.error[data-field=name]")).to_contain_text("dave has a token named laptop")

    # once the page is left and opened again, the token is nowhere in it
    page.reload()
    expect(row.locator("td.state")).to_have_text("active")
    assert laptop not in page.content()
    # when he revokes it, it is refused
    row.locator("button[name=revoke]").click()
    expect(row.locator("td.state")).to_have_text("revoked")
    assert whoami(auth_server, laptop).status_code == 401
    assert whoami(auth_server, dave).status_code == 200
    actions = page.locator("table.audit tbody tr td:nth-child(2)")
    expect(actions).to_have_text(["token.revoke", "token.create"])

    # the users page is an admin's: dave is told so, and the server refuses him its reads anyway
    page.goto(auth_server.url + "/users")
    expect(page.locator("p.not-admin")).to_contain_text("Only an admin manages users")
    assert httpx.get(auth_server.url + "/api/v1/users", headers={"Authorization": f"Bearer {dave}"}).status_code == 403

    # the token this browser signs in with is marked (and only it); revoking it signs him out here
    first = made.json()["token"]["info"]["id"]
    assert whoami(auth_server, dave).json()["token"] == first
    page.goto(auth_server.url + "/account")
    expect(page.locator("table.tokens .this-browser")).to_have_count(1)
    mine = page.locator(f"table.tokens tr[data-token='{first}']")
    expect(mine.locator(".this-browser")).to_have_text("this browser")
    mine.locator("button[name=revoke]").click()
    page.wait_for_url("**/login")
    expect(page.locator("#who")).to_have_text("")
    assert whoami(auth_server, dave).status_code == 401


def test_without_auth_the_pages_say_that_users_and_tokens_sign_nobody_in(server, page):
    # given a server without --auth, where every request acts as its owner
    me = httpx.get(server.url + "/api/v1/whoami", headers=server.headers).json()
    assert me["users"] is False and me["token"] is None  # the server's own token is no user's
    # then the account page makes no token, saying why, and the users page says what its users are worth
    open_signed_in(page, server.url, server.token, "/account")
    expect(page.locator("dd[data-key=user]")).to_have_text("local")
    expect(page.locator("p.local-token")).to_contain_text("This server runs without --auth")
    expect(page.locator("form.token-form")).to_have_count(0)
    page.locator("#nav a[data-nav=users]").click()
    expect(page.locator("p.no-auth")).to_contain_text("sign nobody in until it runs with --auth")
