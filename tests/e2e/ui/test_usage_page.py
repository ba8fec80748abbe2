"""The usage page in a real browser against a real server with users and prices: two teams' jobs (one failed) are
counted per team and per user as `trainyard usage` counts them, with their cost; the grouping stays in the address;
the CSV holds the API's rows; a member sees their own team's only."""

from __future__ import annotations

import csv

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import PY
from tests.support.browser import open_signed_in, screenshot
from tests.support.servers import ServerProcess
from trainyard.sdk.client import Client

pytestmark = pytest.mark.slow


@pytest.fixture
def priced(tmp_path):
    config = tmp_path / "server.yaml"
    config.write_text("prices: {currency: EUR, cpu_hour: 3600}\n")  # a core-second costs 1
    srv = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "4", "--memory", "8Gi", "--config", str(config)])
    srv.start()
    yield srv
    srv.stop_all()


def add_user(server, name: str, team: str) -> str:  # noqa: ANN001
    made = httpx.post(server.url + "/api/v1/users", headers=server.headers, timeout=30,
                      json={"name": name, "team": team, "role": "member"})
    assert made.status_code == 201, made.text
    return made.json()["token"]["secret"]


def usage(server, token: str, by: str) -> dict[str, dict]:  # noqa: ANN001
    got = httpx.get(server.url + "/api/v1/usage", params={"by": by, "since": "1d"}, timeout=30,
                    headers={"Authorization": f"Bearer {token}"})
    assert got.status_code == 200, got.text
    return {row["key"]: row for row in got.json()["rows"]}


def test_usage_by_team_and_user_with_its_cost_in_the_address_and_as_csv(priced, page, tmp_path):
    alice, bob = add_user(priced, "alice", "vision"), add_user(priced, "bob", "nlp")
    # given alice's two jobs (one fails) and bob's one, ended
    jobs = [(alice, ["sleep", "1"], 2), (alice, [PY, "-c", "import time, sys; time.sleep(1); sys.exit(3)"], 1),
            (bob, ["sleep", "1"], 1)]
    ids = [Client(priced.url, token=token).submit({"command": command, "resources": {"cpu": cpu, "memory": "256Mi"}}).id
           for token, command, cpu in jobs]
    Client(priced.url, token=priced.token).wait_all(ids, timeout=120)
    teams = usage(priced, priced.token, "team")
    assert set(teams) == {"vision", "nlp"} and teams["vision"]["cpu_hours_failed"] > 0

    # when an admin opens the usage page: a row per team, as the API counts them, the failed part apart, the cost
    open_signed_in(page, priced.url, priced.token, "/usage?since=24h")
    expect(page.locator("#nav a[data-nav=usage]")).to_have_class("active")
    expect(page.locator("table.usage tbody tr")).to_have_count(2)
    expect(page.locator("table.usage thead")).to_contain_text("cost (EUR)")
    for team, row in teams.items():
        line = page.locator(f"table.usage tr[data-key={team}]")
        expect(line.locator(".attempts")).to_have_text(str(row["attempts"]))
        expect(line.locator(".cost")).to_have_text(f"{row['cost']:.2f}")
    expect(page.locator("table.usage tr[data-key=vision] td.lost").nth(3)).not_to_have_text("–")  # CPU-h failed
    expect(page.locator("table.usage tr[data-key=nlp] td.lost").nth(3)).to_have_text("–")
    expect(page.locator("table.usage tfoot .attempts")).to_have_text("3")
    screenshot(page, "usage")

    # by user: the choice goes in the address, and a reload keeps it
    page.select_option("select[name=by]", "user")
    page.wait_for_url("**/usage?since=24h&by=user")
    page.reload()
    expect(page.locator("select[name=by]")).to_have_value("user")
    expect(page.locator("table.usage thead th").first).to_have_text("user")
    expect(page.locator("table.usage tbody tr")).to_have_count(2)
    # and the CSV holds the API's rows, each number as the API wrote it
    with page.expect_download() as saved:
        page.click("button[name=csv]")
    path = tmp_path / "usage.csv"
    saved.value.save_as(path)
    users = usage(priced, priced.token, "user")
    rows = {r["key"]: r for r in csv.DictReader(path.open())}
    assert set(rows) == {"alice", "bob"} == set(users)
    for key, row in users.items():
        assert int(rows[key]["attempts"]) == row["attempts"]
        assert float(rows[key]["cpu_hours"]) == pytest.approx(row["cpu_hours"], rel=1e-12)
        assert float(rows[key]["cost"]) == pytest.approx(row["cost"], rel=1e-12)

    # a member sees their own team's only
    open_signed_in(page, priced.url, alice, "/usage")
    expect(page.locator("table.usage tbody tr")).to_have_count(1)
    expect(page.locator("table.usage tbody tr")).to_have_attribute("data-key", "vision")
