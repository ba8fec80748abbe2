"""The secrets page in a real browser against a real server: a secret set through the form is listed with its
length and never shown back (nor kept by the page), replaced, and deleted through its button; the server's own
message shows by the form for a bad name; a member, whose role may not set one, finds Set disabled saying why."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in, screenshot

pytestmark = pytest.mark.slow
VALUE = "wb-7Hq2-" + "x9" * 12  # 32 characters, unlike anything else on the page
NEW_VALUE = "wb-8Kp3-" + "y7" * 20  # 48


def set_secret(page, name: str, value: str) -> None:  # noqa: ANN001
    page.fill("input[name=name]", name)
    page.fill("input[name=value]", value)
    page.click("form.secret-form button[type=submit]")


def never_shown(page, value: str) -> None:  # noqa: ANN001
    assert value not in page.content()
    assert value not in page.evaluate("JSON.stringify([localStorage, sessionStorage])")


def test_a_secret_is_set_listed_replaced_and_deleted_and_its_value_never_shown(server, page):
    # given an admin of no team on the secrets page, with none set yet
    open_signed_in(page, server.url, server.token, "/secrets")
    expect(page.locator("#nav a[data-nav=secrets]")).to_have_class("active")
    expect(page.locator("table.secrets tbody")).to_contain_text("trainyard secret set NAME")
    expect(page.locator("select[name=team] option")).to_have_text(["no team"])
    assert page.get_attribute("input[name=value]", "type") == "password"
    assert page.get_attribute("input[name=value]", "autocomplete") == "off"

    # when one is set through the form
    set_secret(page, "wandb", VALUE)

    # then it is listed with its length and who set it, the field is cleared, and the value is nowhere
    row = page.locator("tr[data-secret=wandb]")
    expect(row.locator(".length")).to_have_text("32")
    expect(row).to_contain_text("—")
    expect(row).to_contain_text("local")
    expect(page.locator("ul.secret-errors li.ok")).to_have_text("✓ secret wandb of no team set (32 characters)")
    expect(page.locator("input[name=value]")).to_have_value("")
    expect(page.locator("form.secret-form")).to_contain_text("secrets: [wandb]")
    never_shown(page, VALUE)
    screenshot(page, "secrets")

    # when it is replaced from its row, then one row shows the new length
    row.locator("button[name=replace]").click()
    expect(page.locator("input[name=name]")).to_have_value("wandb")
    expect(page.locator("input[name=value]")).to_be_focused()
    page.fill("input[name=value]", NEW_VALUE)
    page.click("form.secret-form button[type=submit]")
    expect(row.locator(".length")).to_have_text("48")
    expect(page.locator("table.secrets tbody tr")).to_have_count(1)
    never_shown(page, NEW_VALUE)

    # a bad name is refused, the server's message by its field
    set_secret(page, "bad name", VALUE)
    error = page.locator("ul.secret-errors li.error[data-field=name]")
    expect(error).to_contain_text("use letters, digits")
    expect(page.locator("table.secrets tbody tr")).to_have_count(1)
    never_shown(page, VALUE)

    # when it is deleted through its button, confirmed, then it is gone
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    row.locator("button[name=delete]").click()
    expect(row).to_have_count(0)
    expect(page.locator("table.secrets tbody")).to_contain_text("No secret is set")
    assert "wandb" in asked[0]
    assert httpx.get(server.url + "/api/v1/secrets", headers=server.headers).json() == []


def test_a_member_sees_why_it_may_not_set_one(auth_server, page):
    # given a member (not a maintainer) of team vision
    admin = (auth_server.home / "first-admin-token").read_text().strip()
    made = auth_server.cli("admin", "user", "create", "alice", "--team", "vision", "--role", "member",
                           env={"TRAINYARD_TOKEN": admin})
    assert made.returncode == 0, made.stderr
    open_signed_in(page, auth_server.url, made.stdout.strip().splitlines()[-1], "/secrets")
    # the team picked is theirs, and no team is not offered
    expect(page.locator("select[name=team] option")).to_have_text(["vision (member)"])

    # when they fill the form, then Set stays disabled, saying why, and the server refuses as before
    page.fill("input[name=name]", "wandb")
    page.fill("input[name=value]", VALUE)
    set_button = page.locator("form.secret-form button[type=submit]")
    expect(set_button).to_be_disabled()
    expect(set_button).to_have_attribute("title", "members cannot change team vision's secrets (maintainers do)")
    member = {"Authorization": f"Bearer {made.stdout.strip().splitlines()[-1]}"}
    refused = httpx.put(auth_server.url + "/api/v1/secrets/wandb", params={"team": "vision"}, json={"value": VALUE},
                        headers=member, timeout=30)
    assert refused.status_code == 403 and "maintainers do" in refused.json()["message"], refused.text
    expect(page.locator("table.secrets tbody tr[data-secret]")).to_have_count(0)
    never_shown(page, VALUE)

    # an admin in no team is offered every team, and no team
    page.goto("about:blank")  # a new page load: the same path with another token in its fragment would not be one
    open_signed_in(page, auth_server.url, admin, "/secrets")
    expect(page.locator("select[name=team] option")).to_have_text(["vision", "no team"])
    set_secret(page, "wandb", VALUE)  # the first option: team vision
    expect(page.locator("table.secrets tbody tr[data-secret=wandb] td").nth(1)).to_have_text("vision")
    never_shown(page, VALUE)
