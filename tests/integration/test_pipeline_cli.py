"""`trainyard pipeline cancel` and `pipeline logs` in-process against the API with the fake engine, on SQLite and
PostgreSQL: what they say of a run that already ended, and of a step name that names no step."""

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


def test_logs_of_a_step_name_that_begins_several_names_them_all(env, cli):  # noqa: F811
    _, sdk, _, _ = env
    run = sdk.pipelines.run(PIPELINE)

    prefix = cli("logs", run.id, "scale")
    typo = cli("logs", run.id, "scale-secnd")
    foreach = cli("logs", run.id, "train")

    assert prefix.exit_code == 2, prefix.output
    assert f"STEP: run {run.id} has no step 'scale'; did you mean scale-first or scale-second?" in prefix.stderr
    assert typo.exit_code == 2 and "did you mean scale-second or scale-first?" in typo.stderr, typo.output
    assert foreach.exit_code == 2 and "is a foreach: name one of its 2 items (train-0 … train-1)" in foreach.stderr
