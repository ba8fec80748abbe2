"""`trainyard pipeline cancel` in-process against the API with the fake engine, on SQLite and PostgreSQL: what it says
of a run that already ended."""

import pytest
from typer.testing import CliRunner

from tests.integration.test_api import env  # noqa: F401  (the fixture)
from trainyard.cli.main import app

pytestmark = pytest.mark.postgres

PIPELINE = {
    "name": "p",
    "steps": {
        "scale-first": {"command": "echo one"},
        "scale-second": {"command": "echo two", "needs": ["scale-first"]},
        "train": {"foreach": 2, "command": "echo {{item}}", "needs": ["scale-second"]},
    },
}


@pytest.fixture
def cli(env, monkeypatch):  # noqa: F811
    """``cli("cancel", run)`` runs `trainyard pipeline cancel RUN` in-process against ``env``'s app: the result
    (exit code, stdout and stderr apart)."""
    _, sdk, _, _ = env
    monkeypatch.setattr("trainyard.cli.pipelines.client", lambda: sdk)
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["pipeline", *args], prog_name="trainyard")


def test_cancel_of_a_run_that_already_ended_says_so_and_leaves_it(env, cli):  # noqa: F811
    _, sdk, _, _ = env
    run = sdk.pipelines.run(PIPELINE)

    first = cli("cancel", run.id)
    assert first.exit_code == 0, first.output
    assert "already ended" not in first.stderr
    ended = sdk.pipelines.wait(run.id, timeout=10)
    assert ended.status.value == "cancelled"

    again = cli("cancel", run.id)

    # as `trainyard cancel JOB` of an ended job: its status, and nothing refused (exit 0)
    assert again.exit_code == 0, again.output
    assert again.stdout.split() == [run.id, "cancelled"]
    assert f"run {run.id} had already ended (cancelled): nothing to cancel" in again.stderr
    assert sdk.pipelines.get(run.id).ended_at == ended.ended_at

