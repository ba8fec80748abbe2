"""`trainyard doctor` on a client that `trainyard login` pointed at a team's server: it says where the server came
from, and does not look for the server's secrets key in this client's home, where it never is."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def logged_in(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "login.json").write_text(json.dumps({"server": "http://127.0.0.1:9", "token": "ty_x"}))
    monkeypatch.setenv("TRAINYARD_HOME", str(home))
    monkeypatch.delenv("TRAINYARD_SERVER", raising=False)
    return home


def test_doctor_names_login_json_as_where_the_server_came_from(logged_in):
    from trainyard.cli.doctor import _server

    found: list = []
    assert _server(found) is None  # nothing listens on port 9
    assert "`trainyard login`" in found[0].found and str(logged_in / "login.json") in found[0].found, found[0]
    assert "server.json" not in found[0].found


def test_doctor_leaves_the_servers_secrets_key_to_the_servers_machine(logged_in):
    from typer.testing import CliRunner

    from trainyard.cli.main import app

    out = CliRunner().invoke(app, ["doctor"]).stdout
    line = next(ln for ln in out.splitlines() if " secrets " in ln)
    assert "no key yet" not in line and str(logged_in) not in line and "its machine" in line, line
