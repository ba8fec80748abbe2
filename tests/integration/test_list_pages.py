"""Sweeps, services, schedules, clusters and subscriptions page as jobs and pipeline runs do: newest first, at most
``limit`` a page (500 at most, 50 unless asked), and a ``next_cursor`` that continues below the last; the SDK and
the CLI walk the pages."""

from __future__ import annotations

import importlib
import json

import pytest
from typer.testing import CliRunner

from tests.support.inprocess import in_process
from trainyard.spec.cluster import ClusterSpec
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=64, memory=256 * 2**30)]
N = 5
SWEEP = {"job": {"command": "train --x {{params.x}}"}, "parameters": {"x": {"values": [1]}},
         "metric": {"name": "acc"}, "method": "grid", "parallel": 1}
FAR = "0 0 1 1 *"  # 1 January: the server's own loop never fires during a test


def _made(e) -> dict[str, list[str]]:  # noqa: ANN001
    """``N`` of each, oldest first: what each listing names them by."""
    made: dict[str, list[str]] = {k: [] for k in ("sweeps", "services", "schedules", "clusters", "subscriptions")}
    for i in range(N):
        made["sweeps"].append(e.sdk.sweep({**SWEEP, "name": f"s{i}"}).id)
        made["services"].append(e.sdk.services.apply({"name": f"web{i}", "command": "app"}).id)
        made["schedules"].append(e.sdk.schedule({"name": f"n{i}", "cron": FAR, "job": {"command": "x"}}).id)
        made["clusters"].append(e.platform.dask.clusters.create(ClusterSpec(name=f"c{i}", workers=1)))
        made["subscriptions"].append(e.sdk.notify.subscribe("ops", on=["failed"]).id)
    return made


def test_every_listing_pages_newest_first_and_each_page_is_bounded(db_url, tmp_path):
    hooks = {"ops": {"url": "http://127.0.0.1:9/hook"}}
    with in_process(db_url, tmp_path / "home", NODES, webhooks=hooks) as e:
        made = _made(e)
        for what, ids in made.items():
            seen, cursor, pages = [], None, 0
            while True:
                body = e.tc.get(f"/api/v1/{what}", params={"limit": 2, "all": True,
                                                           **({"cursor": cursor} if cursor else {})}).json()
                assert len(body["items"]) <= 2, (what, body)
                seen += [x["id"] for x in body["items"]]
                cursor, pages = body["next_cursor"], pages + 1
                if cursor is None:
                    break
            assert seen == ids[::-1] and pages == 3, (what, seen)
            for bad, field in (({"limit": 0}, "limit"), ({"limit": 501}, "limit"), ({"cursor": "x"}, "cursor")):
                r = e.tc.get(f"/api/v1/{what}", params=bad)
                assert r.status_code == 422 and field in r.text, (what, bad, r.text)

        assert [s.id for s in e.sdk.sweeps.list(limit=3)] == made["sweeps"][:-4:-1]
        assert [s.id for s in e.sdk.services.list(include_ended=True)] == made["services"][::-1]
        assert [s.id for s in e.sdk.schedules.list()] == made["schedules"][::-1]
        assert [s.id for s in e.sdk.notify.list()] == made["subscriptions"][::-1]
        page = e.sdk.notify.page(limit=4)
        assert len(page.items) == 4 and [s.id for s in e.sdk.notify.page(cursor=page.next_cursor).items] == \
            made["subscriptions"][:1]


def test_the_cli_lists_a_page_and_says_how_to_see_more(db_url, tmp_path, monkeypatch):
    from trainyard.cli.main import app

    hooks = {"ops": {"url": "http://127.0.0.1:9/hook"}}
    with in_process(db_url, tmp_path / "home", NODES, webhooks=hooks) as e:
        made = _made(e)
        for module in ("sweeps", "schedules", "notify", "services"):
            importlib.import_module(f"trainyard.cli.{module}")
            monkeypatch.setattr(f"trainyard.cli.{module}.client", lambda: e.sdk)
        for args, ids in ((["sweep", "ls"], made["sweeps"]), (["schedule", "ls"], made["schedules"]),
                          (["notify", "ls"], made["subscriptions"]), (["service", "ls", "--all"], made["services"])):
            out = CliRunner().invoke(app, [*args, "--limit", "3", "-o", "json"])
            assert out.exit_code == 0, out.output
            assert [x["id"] for x in json.loads(out.stdout)] == ids[:-4:-1], args
            assert "3 shown; more: add --after " in out.stderr, out.stderr
