"""`trainyard token create --expires`: a lifetime out of bounds is refused naming --expires, in days, before
the server is asked (which would name its own field, expires_in, in seconds)."""

import pytest
from typer.testing import CliRunner


@pytest.mark.parametrize("expires, says", [("99999d", "at most 5 years (1825d)"), ("0d", "at least a minute (1m)"),
                                           ("30s", "at least a minute (1m)")])
def test_a_lifetime_out_of_bounds_is_refused_naming_the_flag(monkeypatch, expires, says):
    from trainyard.cli.main import app

    def no_server():  # noqa: ANN202
        raise AssertionError("asked the server")

    monkeypatch.setattr("trainyard.cli.tokens.client", no_server)
    out = CliRunner().invoke(app, ["token", "create", "--name", "ci", "--expires", expires])
    assert out.exit_code == 2, out.output
    assert "--expires" in out.output and says in out.output and "expires_in" not in out.output, out.output
