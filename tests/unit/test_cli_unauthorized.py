"""A 401 to the CLI says which token it sent and what to do, as a user whose token was revoked (or whose user was
disabled) meets it: the token in TRAINYARD_TOKEN, the one `trainyard login` saved, or none at all."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner


@pytest.fixture
def refused(tmp_path, monkeypatch):
    from trainyard.errors import Unauthorized

    def client():  # noqa: ANN202
        raise Unauthorized()

    monkeypatch.setattr("trainyard.cli.tokens.client", client)
    monkeypatch.setenv("TRAINYARD_HOME", str(tmp_path))
    for name in ("TRAINYARD_TOKEN", "TRAINYARD_SERVER"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def hint() -> str:
    from trainyard.cli.main import app

    out = CliRunner().invoke(app, ["token", "ls"])
    assert out.exit_code == 1, out.output
    return " ".join(out.stderr.split("hint:", 1)[1].split())


def test_a_refused_trainyard_token_is_named(refused, monkeypatch):
    monkeypatch.setenv("TRAINYARD_TOKEN", "ty_revoked")
    said = hint()
    assert "TRAINYARD_TOKEN" in said and "revoked" in said and "--token-file" not in said and "ty_" not in said


def test_a_refused_login_token_says_to_log_in_again(refused):
    (refused / "login.json").write_text(json.dumps({"server": "https://yard.example:8470", "token": "ty_old"}))
    said = hint()
    assert str(refused / "login.json") in said and "trainyard login --server https://yard.example:8470" in said
    assert "--token-file" not in said and "ty_old" not in said


def test_with_no_token_of_a_user_the_hint_is_as_before(refused):
    assert "--token-file" in hint()


def test_token_print_gives_the_token_the_cli_sends_and_none_to_another_server(tmp_path, monkeypatch):
    from trainyard.cli.main import app

    monkeypatch.setenv("TRAINYARD_HOME", str(tmp_path))
    monkeypatch.delenv("TRAINYARD_TOKEN", raising=False)
    monkeypatch.setenv("TRAINYARD_SERVER", "https://yard.example:8470")
    (tmp_path / "login.json").write_text(json.dumps({"server": "https://other.example", "token": "ty_other"}))
    out = CliRunner().invoke(app, ["token", "print"])  # the saved login is another server's: never sent here
    assert out.exit_code == 1 and out.stdout == "", out.output
    assert "no token for https://yard.example:8470" in out.stderr and "trainyard login --server" in out.stderr
    (tmp_path / "login.json").write_text(json.dumps({"server": "https://yard.example:8470", "token": "ty_saved"}))
    assert CliRunner().invoke(app, ["token", "print"]).stdout == "ty_saved\n"
    monkeypatch.setenv("TRAINYARD_TOKEN", "ty_env")
    assert CliRunner().invoke(app, ["token", "print"]).stdout == "ty_env\n"
