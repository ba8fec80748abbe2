"""The notifications page in a real browser against a real server whose config names two webhooks, POSTing to a
real HTTP receiver on loopback: the webhooks are listed by name and kind, never their addresses; a subscription
made through the form is listed as the server has it, the server's refusal shows by its field; a job that fails
is POSTed once, counted as sent and listed among the subscription's deliveries with a link to the job, while a
half-filled form survives the list's refresh; Remove deletes it once confirmed. A server with no webhook says
how the admin names one instead of offering the form."""

from __future__ import annotations

import json

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import open_signed_in, screenshot
from tests.support.servers import ServerProcess
from tests.support.stub_http import JsonServer

pytestmark = pytest.mark.slow
TOO_LONG = "nightly-" + "x" * 60  # 68 characters: a name glob has at most 63


@pytest.fixture
def receiver():
    r = JsonServer(lambda method, path: (200, {}), lambda req: (req.method, req.path, json.loads(req.body)))
    yield r
    r.close()


@pytest.fixture
def hooked(tmp_path, receiver):
    """A server (no --auth: its home token is the local admin's) whose config names two webhooks."""
    config = tmp_path / "server.yaml"
    config.write_text(f"webhooks:\n  alerts: {{url: '{receiver.url}/hook-alerts'}}\n"
                      f"  chat: {{url: '{receiver.url}/hook-chat', format: slack, teams: [vision]}}\n")
    srv = ServerProcess(tmp_path / "home", ["--cpus", "2", "--memory", "4Gi", "--container-runtime", "none",
                                            "--config", str(config)])
    srv.start()
    yield srv
    srv.stop_all()


def subscriptions(server) -> list[dict]:  # noqa: ANN001
    return httpx.get(server.url + "/api/v1/subscriptions", headers=server.headers, timeout=30).json()["items"]


def test_a_webhook_is_subscribed_through_the_form_hears_of_a_failed_job_and_is_removed(hooked, receiver, page):
    # given a team, and the page, signed in as the server's local admin (in no team, but an admin: offered all)
    made = httpx.post(hooked.url + "/api/v1/teams", json={"name": "vision"}, headers=hooked.headers, timeout=30)
    assert made.status_code == 201, made.text
    open_signed_in(page, hooked.url, hooked.token, "/notifications")
    expect(page.locator("#nav a[data-nav=notifications]")).to_have_class("active")

    # then both webhooks are listed by name, kind and teams, and their addresses appear nowhere
    hooks = page.locator("table.webhooks tbody tr")
    expect(hooks).to_have_count(2)
    expect(hooks.nth(0)).to_have_text("alertsjsonevery team")
    expect(hooks.nth(1)).to_have_text("chatslackteams vision")
    expect(page.locator(".hint")).to_contain_text("webhooks:")
    html = page.content()
    assert f"{receiver.url}/" not in html and "hook-alerts" not in html and "hook-chat" not in html
    # the form offers them, failed checked alone, my jobs; the team select only shows for a team's jobs; no
    # subscription yet
    expect(page.locator("select[name=webhook] option")).to_have_text(["alerts (json)", "chat (slack)"])
    assert page.locator("input[name=on]:checked").evaluate_all("cs => cs.map(c => c.value)") == ["failed"]
    expect(page.locator("select[name=scope]")).to_have_value("mine")
    expect(page.locator("select[name=team]")).to_be_hidden()
    expect(page.locator("select[name=team] option")).to_have_text(["vision"])
    expect(page.locator("select[name=scope] option[value=all]")).to_be_enabled()
    expect(page.locator("table.subscriptions tbody")).to_contain_text("No subscription yet")

    # when no end is ticked, then the server's refusal shows by its field
    page.uncheck("input[name=on][value=failed]")
    page.click("form.notify-form button[type=submit]")
    expect(page.locator("ul.notify-said li.error[data-field=on]")).to_contain_text("at least 1 item")
    # and a glob too long, by its own
    page.check("input[name=on][value=failed]")
    page.fill("input[name=name]", TOO_LONG)
    page.click("form.notify-form button[type=submit]")
    expect(page.locator("ul.notify-said li.error[data-field=name]")).to_contain_text("at most 63 characters")
    expect(page.locator("ul.notify-said li")).to_have_count(1)
    # and a label selector that does not parse, by its own
    page.fill("input[name=name]", "nightly-*")
    page.fill("input[name=labels]", "stage in (prod")
    page.click("form.notify-form button[type=submit]")
    expect(page.locator("ul.notify-said li.error[data-field=labels]")).to_contain_text("parentheses")
    assert subscriptions(hooked) == []

    # when alerts is subscribed to the failures of my jobs named nightly-*, with no scratch label
    page.fill("input[name=labels]", "!scratch")
    page.click("form.notify-form button[type=submit]")

    # then it is listed, the form's glob is cleared, and the server has it so
    expect(page.locator("ul.notify-said li.ok")).to_contain_text("✓ alerts hears of failed of my jobs (")
    [sub] = subscriptions(hooked)
    expect(page.locator("ul.notify-said li.ok")).to_have_text(f"✓ alerts hears of failed of my jobs ({sub['id']})")
    expect(page.locator("input[name=name]")).to_have_value("")
    expect(page.locator("input[name=labels]")).to_have_value("")
    row = page.locator(f"tr[data-subscription='{sub['id']}']")
    expect(row.locator("td").nth(0)).to_have_text("alerts")
    expect(row.locator("td.on")).to_have_text("failed")
    expect(row.locator("td.jobs")).to_have_text("my jobs · name nightly-* · labels !scratch")
    for cell in ("sent", "pending", "failed"):
        expect(row.locator(f"td.{cell}")).to_have_text("0")
    expect(row.locator("td").nth(6)).to_have_text("local")
    assert (sub["webhook"], sub["on"], sub["scope"], sub["name"], sub["queue"], sub["owner"], sub["labels"]) == \
        ("alerts", ["failed"], "mine", "nightly-*", None, "local", "!scratch")

    # given a form half filled in meanwhile
    page.check("input[name=on][value=succeeded]")
    page.fill("input[name=queue]", "half-typed")

    # when a job matching the glob fails
    made = httpx.post(hooked.url + "/api/v1/jobs", json={"spec": {"name": "nightly-x", "command": ["false"]}},
                      headers=hooked.headers, timeout=30)
    assert made.status_code == 201, made.text
    job_id = made.json()["id"]
    ended = httpx.get(f"{hooked.url}/api/v1/jobs/{job_id}/wait", params={"timeout": 60}, headers=hooked.headers,
                      timeout=90).json()
    assert ended["status"] == "failed"

    # then the page counts one sent, by its own refresh, and the half-filled form is as it was
    expect(row.locator("td.sent")).to_have_text("1", timeout=20_000)
    expect(row.locator("td.pending")).to_have_text("0")
    expect(row.locator("td.failed")).to_have_text("0")
    expect(page.locator("input[name=queue]")).to_have_value("half-typed")
    assert page.locator("input[name=on]:checked").evaluate_all("cs => cs.map(c => c.value)") == ["succeeded", "failed"]
    # and the receiver got one POST, at the subscribed webhook's address, of that job
    [(method, path, told)] = receiver.got
    assert (method, path, told["event"], told["job"]["id"]) == ("POST", "/hook-alerts", "job.failed", job_id)

    # when its deliveries are opened, then that one is listed with a link to the job
    row.locator("button[name=deliveries]").click()
    expect(row.locator("button[name=deliveries]")).to_have_attribute("aria-expanded", "true")
    delivery = page.locator(f"tr[data-deliveries-of='{sub['id']}'] tbody tr")
    expect(delivery).to_have_count(1)
    expect(delivery.locator(f"a[href='/jobs/{job_id}']")).to_have_text(job_id)
    expect(delivery.locator("td.event")).to_have_text("failed")
    expect(delivery.locator("[data-status]")).to_have_text("sent")
    expect(delivery.locator("[data-status]")).to_have_class("badge ok")
    expect(delivery.locator("td.attempts")).to_have_text("1")
    expect(delivery.locator("td.reason")).to_have_text("")
    screenshot(page, "notifications")
    # closed again, they are gone
    row.locator("button[name=deliveries]").click()
    expect(page.locator("tr.deliveries")).to_have_count(0)

    # when Remove is dismissed, nothing changes; confirmed, it is gone here and on the server
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    row.locator("button[name=remove]").click()
    page.evaluate("0")  # answered once the dialog is
    assert sub["id"] in asked[0] and "alerts" in asked[0]
    assert len(subscriptions(hooked)) == 1
    page.once("dialog", lambda d: d.accept())
    row.locator("button[name=remove]").click()
    expect(row).to_have_count(0)
    expect(page.locator("ul.notify-said li.ok")).to_have_text(f"✓ subscription {sub['id']} removed")
    expect(page.locator("table.subscriptions tbody")).to_contain_text("No subscription yet")
    assert subscriptions(hooked) == []

    # when chat is subscribed to a team's cancelled jobs, then the team chosen is the one the server has
    page.select_option("select[name=webhook]", "chat")
    page.uncheck("input[name=on][value=succeeded]")
    page.uncheck("input[name=on][value=failed]")
    page.check("input[name=on][value=cancelled]")
    page.select_option("select[name=scope]", "team")
    expect(page.locator("select[name=team]")).to_be_visible()
    page.fill("input[name=queue]", "")
    page.click("form.notify-form button[type=submit]")
    expect(page.locator("table.subscriptions tbody tr[data-webhook=chat] td.jobs")).to_have_text("team vision's jobs")
    [team_sub] = subscriptions(hooked)
    assert (team_sub["webhook"], team_sub["on"], team_sub["scope"], team_sub["team"], team_sub["queue"]) == \
        ("chat", ["cancelled"], "team", "vision", None)


def test_a_server_with_no_webhook_says_how_the_admin_names_one(server, page):
    # given a server whose config names no webhook, when the page is open
    open_signed_in(page, server.url, server.token, "/notifications")

    # then it says so, with the config that names one, and offers no form
    notice = page.locator(".no-webhook")
    expect(notice).to_contain_text("No webhook you may use is configured on this server")
    expect(notice.locator("pre")).to_contain_text("webhooks:\n  ml-alerts: {url:")
    expect(page.locator("form.notify-form")).to_have_count(0)
    expect(page.locator("table.webhooks")).to_have_count(0)
    expect(page.locator("table.subscriptions tbody")).to_contain_text("No subscription yet")
