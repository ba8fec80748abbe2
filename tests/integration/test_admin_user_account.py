"""An admin changes the Unix account a user's jobs run as (``trainyard admin user account``), checked as at the
user's creation: an account of its own, not root's, not another user's. In-process with the fake engine, users on."""

from __future__ import annotations

import os
import pwd

import pytest
from typer.testing import CliRunner

from tests.integration.test_admin_users import NODES, create
from tests.support.inprocess import in_process


@pytest.fixture
def server(tmp_path, monkeypatch):
    with in_process(f"sqlite:///{tmp_path / 'db'}", tmp_path / "home", NODES, auth=True) as e:
        monkeypatch.setattr("trainyard.cli.admin.client", lambda: e.sdk)
        yield e


def account(*args: str):  # noqa: ANN201
    from trainyard.cli.main import app

    return CliRunner().invoke(app, ["admin", "user", "account", *args])


def another_account() -> str:
    return next(p.pw_name for p in pwd.getpwall() if p.pw_uid not in (0, pwd.getpwnam("nobody").pw_uid))


def test_an_admin_moves_a_users_jobs_to_another_account_and_back_to_none(server, monkeypatch):
    # given alice, whose jobs run as nobody
    assert create(server, "alice", "vision", "nobody").status_code == 201
    other = another_account()
    # when the admin gives her another account
    out = account("alice", other)
    # then her jobs run as it from their next attempt on, and the change is audited with the account it replaced
    assert out.exit_code == 0, out.output
    assert f"user alice's jobs run as {other} from their next attempt on (they ran as nobody)" in out.output
    assert server.sdk.identity.user("alice").os_user == other
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # a server run as root: what a launch asks of run_as
    assert server.platform.identity.run_as("alice")["uid"] == pwd.getpwnam(other).pw_uid
    (record,) = [e for e in server.sdk.identity.audit() if e.action == "user.account"]
    assert record.target == "alice" and record.detail == {"os_user": other, "was": "nobody"}
    # and nobody may now be given to bob, which alice no longer holds
    assert create(server, "bob", "nlp", "nobody").status_code == 201
    # and --clear takes her account away: her jobs run as the server's own
    out = account("alice", "--clear")
    assert out.exit_code == 0 and "run as the server's own account" in out.output, out.output
    assert server.sdk.identity.user("alice").os_user is None and server.platform.identity.run_as("alice") is None


def test_an_account_another_user_has_or_roots_or_a_bad_name_is_refused_naming_os_user(server):
    assert create(server, "alice", "vision", "nobody").status_code == 201
    assert create(server, "bob", "nlp", another_account()).status_code == 201
    for os_user, said in (("nobody", "is user alice's already"), (pwd.getpwuid(0).pw_name, "root's account"),
                          ("No Such!", "a Unix login name"), ("ghost-account", "has no account 'ghost-account'")):
        r = server.tc.put("/api/v1/users/bob/os-user", json={"os_user": os_user})
        assert r.status_code == 422, r.text
        (error,) = r.json()["details"]["errors"]
        assert error["field"] == "os_user" and said in error["message"], error
    assert server.sdk.identity.user("bob").os_user == another_account()  # unchanged
    # alice given her own account again changes nothing, and is no refusal
    assert server.sdk.identity.set_os_user("alice", "nobody").os_user == "nobody"


def test_only_an_admin_changes_an_account_of_a_user_that_is_there_and_the_cli_wants_one_of_two(server):
    alice = {"Authorization": f"Bearer {create(server, 'alice', 'vision', 'nobody').json()['token']['secret']}"}
    r = server.tc.put("/api/v1/users/alice/os-user", json={"os_user": None}, headers=alice)
    assert r.status_code == 403 and "only an admin" in r.json()["message"], r.text
    r = server.tc.put("/api/v1/users/nobody-here/os-user", json={"os_user": None})
    assert r.status_code == 404 and r.json()["message"] == "no such user: nobody-here", r.text
    for args in (["alice"], ["alice", "nobody", "--clear"]):
        out = account(*args)
        assert out.exit_code == 2 and "give an ACCOUNT, or --clear (not both)" in out.output, out.output
    assert server.sdk.identity.user("alice").os_user == "nobody"
