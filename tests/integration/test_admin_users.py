"""Users as an admin manages them (``trainyard admin user …``). In-process with the fake engine and users on, on
SQLite.

Unix accounts (``--os-user``): on a root server a user's jobs run as its account, and the account is all that keeps
one user's running jobs (their environment, secrets included, their work dirs and outputs) from another's. So each
user's account is its own: an account another user already has, or root's, is refused naming ``os_user``.

Teams (``admin user team``): an admin puts a user in a further team, changes its role there, or takes it out."""

from __future__ import annotations

import json
import pwd

import pytest
from typer.testing import CliRunner

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


def test_an_admin_puts_a_user_in_a_team_changes_its_role_and_takes_it_out(server, monkeypatch):
    from trainyard.cli.main import app

    monkeypatch.setattr("trainyard.cli.admin.client", lambda: server.sdk)
    assert create(server, "alice", "vision", "nobody").status_code == 201
    server.sdk.identity.create_team("nlp")

    def teams() -> dict[str, str]:
        out = CliRunner().invoke(app, ["admin", "user", "show", "alice", "-o", "json"])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)["teams"]

    # when the admin adds alice to nlp as a viewer, then makes her a member there
    out = CliRunner().invoke(app, ["admin", "user", "team", "alice", "nlp", "--role", "viewer"])
    assert out.exit_code == 0 and "nlp (viewer)" in out.output, out.output
    assert CliRunner().invoke(app, ["admin", "user", "team", "alice", "nlp"]).exit_code == 0
    assert teams() == {"nlp": "member", "vision": "member"}
    # and takes her out of vision
    out = CliRunner().invoke(app, ["admin", "user", "team", "alice", "vision", "--remove"])
    assert out.exit_code == 0, out.output
    assert teams() == {"nlp": "member"}
    # then a role no team has, or a team that does not exist, is refused naming it
    out = CliRunner().invoke(app, ["admin", "user", "team", "alice", "nlp", "--role", "owner"])
    assert out.exit_code != 0 and "role" in out.output, out.output
    out = CliRunner().invoke(app, ["admin", "user", "team", "alice", "nope"])
    assert out.exit_code != 0 and "no such team: nope" in out.output, out.output


def test_an_admin_enables_a_disabled_user_whose_tokens_not_revoked_meanwhile_work_again(server, monkeypatch):
    from trainyard.cli.main import app

    monkeypatch.setattr("trainyard.cli.admin.client", lambda: server.sdk)
    # given alice with her first token and a second one, disabled by the admin
    made = create(server, "alice", "vision", "nobody")
    assert made.status_code == 201, made.text
    first = {"Authorization": f"Bearer {made.json()['token']['secret']}"}
    laptop = server.tc.post("/api/v1/tokens", json={"name": "laptop", "user": "alice"}).json()
    assert CliRunner().invoke(app, ["admin", "user", "disable", "alice"]).exit_code == 0
    assert server.tc.get("/api/v1/whoami", headers=first).status_code == 401
    # and her laptop's token revoked while she was disabled
    assert server.tc.post(f"/api/v1/tokens/{laptop['info']['id']}/revoke").status_code == 200
    # when the admin enables her (the old CLI had no way back: `enable` was no command)
    out = CliRunner().invoke(app, ["admin", "user", "enable", "alice"])
    assert out.exit_code == 0, out.output
    # then her first token works again, it alone, and the CLI names the tokens that came back
    assert "user alice enabled; its tokens work again: first (t-" in out.output, out.output
    assert "laptop" not in out.output
    assert server.tc.get("/api/v1/whoami", headers=first).json()["user"] == "alice"
    revoked = {"Authorization": f"Bearer {laptop['secret']}"}
    assert server.tc.get("/api/v1/whoami", headers=revoked).status_code == 401
    assert server.sdk.identity.user("alice").disabled is False
    assert [e.action for e in server.sdk.identity.audit() if e.target == "alice"][-2:] == ["user.disable",
                                                                                          "user.enable"]


def test_only_an_admin_enables_a_user_and_one_that_is_not_there_is_not_found(server):
    # given bob, disabled, and alice, a member
    alice = {"Authorization": f"Bearer {create(server, 'alice', 'vision', 'nobody').json()['token']['secret']}"}
    assert server.tc.post("/api/v1/users", json={"name": "bob", "team": "vision"}).status_code == 201
    server.sdk.identity.disable_user("bob")
    # then alice may not enable him, and nobody enables a user that is not there
    r = server.tc.post("/api/v1/users/bob/enable", headers=alice)
    assert r.status_code == 403 and "only an admin" in r.json()["message"], r.text
    assert server.sdk.identity.user("bob").disabled is True
    r = server.tc.post("/api/v1/users/nobody-here/enable")
    assert r.status_code == 404 and r.json()["message"] == "no such user: nobody-here", r.text
    # and enabling one that is not disabled changes nothing
    assert server.sdk.identity.enable_user("alice").disabled is False
