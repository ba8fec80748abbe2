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


@pytest.mark.parametrize("command", [["service", "scale", "svc"], ["serve", "j-1", "--name", "svc"]],
                         ids=["service scale", "serve"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "100001", "1e400"])
def test_a_target_concurrency_that_is_not_a_positive_finite_number_is_refused_naming_the_flag(nowhere, command,
                                                                                               value):
    # given no server answering: the refusal comes before the request (a NaN was a JSON encoding traceback, then
    # the model's words naming its field, target_concurrency, or service.autoscale.target_concurrency under serve)
    got = CliRunner().invoke(app, [*command, "--target-concurrency", value])
    assert got.exit_code == 2, got.output
    shown = {"1e400": "inf"}.get(value, value)
    assert got.stderr == (f"error: --target-concurrency: must be a finite number above 0 and at most 100000 "
                          f"(not {shown!r})\n"), got.stderr


def test_the_target_concurrency_flags_take_the_specs_bounds():
    from trainyard.cli.services import TARGET_CONCURRENCY
    from trainyard.spec.service import Autoscale, ScaleRequest

    for model in (Autoscale, ScaleRequest):
        metadata = model.model_fields["target_concurrency"].metadata
        assert {k: getattr(m, k) for m in metadata for k in ("gt", "le") if hasattr(m, k)} == TARGET_CONCURRENCY


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_audit_since_refuses_a_unix_time_that_is_not_finite(nowhere, value):
    # float() took them: a query no row can answer, sent to the server
    got = CliRunner().invoke(app, ["audit", "--since", value])
    assert got.exit_code == 2, got.output
    assert got.stderr.startswith(f"error: --since: {value!r}: write 1h, 2d"), got.stderr
