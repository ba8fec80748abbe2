"""Numeric flags a careless or hostile user gives: a negative, NaN or infinite wait, a refresh that never comes, a
NaN target concurrency, are refused naming the flag or field (exit 2) before any server is asked."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from trainyard.cli.main import app


@pytest.fixture
def nowhere(monkeypatch, tmp_path):
    """A home with no server, and a server address where nothing listens: nothing is started, nothing answers."""
    monkeypatch.setenv("TRAINYARD_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINYARD_SERVER", "http://127.0.0.1:9")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.yaml").write_text("job: {command: 'echo {{params.x}}'}\nparameters: {x: {values: [1]}}\n"
                                         "metric: {name: m, goal: minimize}\n")


@pytest.mark.parametrize("argv, flag", [
    (["sweep", "run", "sweep.yaml", "--wait", "--timeout", "nan"], "--timeout"),  # waited for ever
    (["sweep", "run", "sweep.yaml", "--wait", "--timeout", "-5"], "--timeout"),  # gave up at once
    (["nodes", "drain", "n1", "--timeout", "nan"], "--timeout"),
    (["nodes", "drain", "n1", "--timeout", "-1"], "--timeout"),
    (["server", "stop", "--timeout", "nan"], "--timeout"),  # 'did not stop in nans'
    (["server", "stop", "--timeout", "inf"], "--timeout"),
    (["top", "--interval", "inf"], "--interval"),  # a view that never refreshes
])
def test_a_wait_or_interval_that_is_not_a_finite_span_is_refused_naming_the_flag(nowhere, argv, flag):
    got = CliRunner().invoke(app, argv)
    assert got.exit_code == 2, got.output
    assert got.stderr.startswith(f"error: {flag}: must be a finite number from "), got.stderr


@pytest.mark.parametrize("argv, said", [
    (["wait", "j-1", "--timeout", "nan"], "--timeout: must be a finite number from 0 to 604800 (not 'nan')"),
    (["wait", "j-1", "-t", "inf"], "--timeout: must be a finite number from 0 to 604800 (not 'inf')"),
    (["top", "--interval", "-inf"], "--interval: must be a finite number from 0.5 to 3600 (not '-inf')"),
    (["top", "-i", "soon"], "--interval: must be a finite number from 0.5 to 3600 (not 'soon')"),
    (["cluster", "ls", "--limit", "0"], "--limit: must be a whole number at least 1 (not '0')"),
])
def test_a_number_flag_typer_refuses_is_said_in_one_plain_line_naming_the_flag_and_its_range(nowhere, argv, said):
    # typer's own check said a NaN was 'Input should be less than or equal to 604800', in a boxed panel
    got = CliRunner().invoke(app, argv)
    assert got.exit_code == 2, got.output
    assert got.stderr == f"error: {said}\n", got.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_service_scale_refuses_a_target_concurrency_that_is_not_a_positive_finite_number(nowhere, value):
    # given no server answering: the refusal comes before the request (a NaN was a JSON encoding traceback)
    got = CliRunner().invoke(app, ["service", "scale", "svc", "--target-concurrency", value])
    assert got.exit_code == 2, got.output
    assert "target_concurrency: Input should be" in got.output, got.output
