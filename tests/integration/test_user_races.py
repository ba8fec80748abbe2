"""Two creates of users at once (``admin user create``), on SQLite and PostgreSQL: the API checks that no other
user has the Unix account (``--os-user``), then inserts, so two requests could both pass the check and two users'
jobs ran as one account, each able to read the other's secrets. The store's unique index (0030) settles it: the
second is refused in the check's own words. Real threads, through the API and through two stores on one database
(as two servers)."""

from __future__ import annotations

import threading

import pytest

from tests.support.at_once import at_once
from tests.support.inprocess import in_process
from trainyard.errors import AlreadyExists, InvalidSpec
from trainyard.services.identity import IdentityService
from trainyard.spec.records import NodeInfo
from trainyard.store import Store

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]


def test_two_creates_at_once_of_users_with_one_account_make_one_and_refuse_the_other_naming_os_user(
        db_url, tmp_path, monkeypatch):
    # given two requests that both pass the check before either inserts (the race, made certain)
    check, both_checked = IdentityService._check_account, threading.Barrier(2, timeout=30)

    def checked_together(self, os_user: str) -> None:  # noqa: ANN001
        check(self, os_user)
        both_checked.wait()

    monkeypatch.setattr(IdentityService, "_check_account", checked_together)
    with in_process(db_url, tmp_path / "home", NODES, auth=True) as e:
        answers = {}

        def create(i: int) -> None:
            name = ("alice", "bob")[i]
            answers[name] = e.tc.post("/api/v1/users", json={"name": name, "team": "vision", "os_user": "nobody"})

        # when alice and bob are made at once, both with Unix account nobody
        at_once(create, 2)
        # then one is made and the other refused as the check refuses it (the old code made both)
        assert sorted(r.status_code for r in answers.values()) == [201, 422], {n: r.text for n, r in answers.items()}
        [made] = [n for n, r in answers.items() if r.status_code == 201]
        [other] = [r for r in answers.values() if r.status_code == 422]
        [error] = other.json()["details"]["errors"]
        assert error["field"] == "os_user", error
        assert error["message"].startswith(f"account 'nobody' is user {made}'s already: each user needs an account")
        with_account = [u["name"] for u in e.tc.get("/api/v1/users").json() if u["os_user"] == "nobody"]
        assert with_account == [made]
        # and a create after it hears the same words from the check
        monkeypatch.setattr(IdentityService, "_check_account", check)
        later = e.tc.post("/api/v1/users", json={"name": "carol", "team": "vision", "os_user": "nobody"})
        assert later.json()["details"]["errors"] == [error], later.text


def test_two_servers_creating_users_at_once_keep_each_account_and_name_to_one_user(db_url):
    # given two stores on one database, as two servers sharing it
    stores = [Store(db_url), Store(db_url)]
    try:
        def race(make) -> list:  # noqa: ANN001
            """``make(store, i)`` on both stores at once: what each returned or raised."""
            out: list = [None, None]

            def one(i: int) -> None:
                try:
                    out[i] = make(stores[i], i)
                except Exception as err:  # noqa: BLE001  (what the test looks at)
                    out[i] = err
            at_once(one, 2)
            return out

        # when each makes a user with Unix account nobody (the API's check passed on both: the store has none)
        got = race(lambda s, i: s.create_user(f"u{i}", admin=False, team="vision", role="member", os_user="nobody"))
        # then one is made, the other refused naming os_user and whose account it is
        [refused] = [x for x in got if isinstance(x, Exception)]
        assert isinstance(refused, InvalidSpec) and refused.errors[0]["field"] == "os_user", repr(refused)
        [holder] = [u.name for u in stores[0].users() if u.os_user == "nobody"]
        assert f"is user {holder}'s already" in refused.errors[0]["message"]
        # when both make the same user: one is made, the other told it exists (not an IntegrityError, a 500)
        got = race(lambda s, i: s.create_user("carol", admin=False, team="nlp", role="member", os_user=None))
        assert sorted(type(x).__name__ for x in got) == ["AlreadyExists", "UserInfo"], got
        assert isinstance(next(x for x in got if isinstance(x, Exception)), AlreadyExists)
        # and two users of a new team made at once, without accounts, are both made, the team once
        race(lambda s, i: s.create_user(f"v{i}", admin=False, team="speech", role="member", os_user=None))
        assert stores[1].get_team("speech").members == {"v0": "member", "v1": "member"}
    finally:
        for s in stores:
            s.close()
