"""`trainyard pipeline cancel`, `logs` and `run` in-process against the API with the fake engine, on SQLite and
PostgreSQL: what they say of a run that already ended, of a step name that names no step, and of a component's
image on a server that runs none."""

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tests.integration.test_api import NODES, env  # noqa: F401  (the fixture)
from trainyard.api.app import create_app
from trainyard.cli.main import app
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.sdk.client import Client
from trainyard.services.platform import Platform

pytestmark = pytest.mark.postgres

COMPONENTS = Path(__file__).resolve().parents[2] / "examples" / "components" / "pipeline.yaml"

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


@pytest.mark.parametrize("runtime", ["auto", "none"])
def test_a_component_image_is_warned_of_only_where_the_server_may_run_images(db_url, tmp_path, monkeypatch, runtime):
    # given a server started with --container-runtime RUNTIME
    settings = ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret", container_runtime=runtime)
    platform = Platform(settings, engine=FakeEngine(NODES))
    with TestClient(create_app(platform, "http://testserver"), headers={"Authorization": "Bearer s3cret"}) as tc:
        sdk = Client("http://testserver", token="s3cret", transport=tc._transport)
        monkeypatch.setattr("trainyard.cli.pipelines.client", lambda: sdk)

        # when the example's graph component (its image python:3.11-slim) is run
        r = CliRunner().invoke(app, ["pipeline", "run", str(COMPONENTS)], prog_name="trainyard")

        # then the image is warned of only where it could be run in
        assert r.exit_code == 0, r.output
        run = sdk.pipelines.get(r.stdout.strip())
        said = "component image 'python:3.11-slim': runs in it where a container runtime is"
        assert (said in r.stderr, any(said in w for w in run.warnings)) == (runtime != "none",) * 2, r.stderr
        sdk.pipelines.cancel(run.id)
