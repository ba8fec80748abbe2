"""Users mapped to Unix accounts (``admin user create --os-user``): on a root server a user's jobs run as its
account, and the account is all that keeps one user's running jobs (their environment, secrets included, their
work dirs and outputs) from another's. So each user's account is its own: an account another user already has,
or root's, is refused naming ``os_user``. In-process with the fake engine and users on, on SQLite."""

from __future__ import annotations

import pwd

import pytest

from tests.support.inprocess import in_process
from trainyard.spec.records import NodeInfo

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]


@pytest.fixture
def server(tmp_path):
    with in_process(f"sqlite:///{tmp_path / 'db'}", tmp_path / "home", NODES, auth=True) as e:
        yield e


def create(e, name: str, team: str, os_user: str):  # noqa: ANN001, ANN201
    return e.tc.post("/api/v1/users", json={"name": name, "team": team, "os_user": os_user})


def test_an_account_another_user_runs_as_is_refused_naming_os_user(server):
    # given alice of vision, whose jobs run as `nobody`
    assert create(server, "alice", "vision", "nobody").status_code == 201
    # when the admin maps bob of nlp to the same account
    r = create(server, "bob", "nlp", "nobody")
    # then it is refused, naming the field and whose account it is: bob's jobs could read alice's
    assert r.status_code == 422, r.text
    (error,) = r.json()["details"]["errors"]
    assert error["field"] == "os_user" and "alice" in error["message"] and "nobody" in error["message"]
    assert [u["name"] for u in server.tc.get("/api/v1/users").json()] == ["alice"]


def test_roots_account_is_refused_naming_os_user(server):
    root = pwd.getpwuid(0).pw_name
    r = create(server, "alice", "vision", root)
    assert r.status_code == 422, r.text
    (error,) = r.json()["details"]["errors"]
    assert error["field"] == "os_user" and "root" in error["message"]


def test_each_user_may_have_an_account_of_its_own(server):
    others = [p.pw_name for p in pwd.getpwall() if p.pw_uid not in (0, pwd.getpwnam("nobody").pw_uid)]
    assert create(server, "alice", "vision", "nobody").status_code == 201
    assert create(server, "bob", "nlp", others[0]).status_code == 201
