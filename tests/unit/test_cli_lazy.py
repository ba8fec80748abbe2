"""Each command's module is imported when that command runs (trainyard.cli.lazy): every command must still be
listed by `--help` and offered by shell completion, build, and run; and a command loads only its own module."""

import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from trainyard.cli.main import COMMANDS, app

EVERY_COMMAND = ["run", "rerun", "wait", "ls", "show", "logs", "stack", "exec", "label", "cancel", "rm", "download",
                 "doctor", "init", "top", "events", "usage", "ui", "serve", "login", "audit", "nodes", "server",
                 "queue", "pipeline", "artifact", "cluster", "sweep", "schedule", "service", "admin", "token",
                 "secret", "notify"]
runner = CliRunner()


def trainyard(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainyard", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200", **env})


def test_the_table_holds_every_command_in_the_order_help_lists_them():
    assert list(COMMANDS) == EVERY_COMMAND


def test_help_lists_every_command_with_its_own_help():
    out = trainyard("--help")
    assert out.returncode == 0, out.stderr
    listed = [m[1] for m in re.finditer(r"^│ ([a-z]+)  ", out.stdout, re.MULTILINE)]  # not wrapped help lines
    assert listed == EVERY_COMMAND
    assert "Submit a job." in out.stdout and "Queues: a team's line of jobs" in out.stdout


def test_shell_completion_offers_every_command():
    out = trainyard(_TRAINYARD_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS="trainyard ")
    assert out.returncode == 0, out.stderr
    assert re.findall(r'^(?:_arguments .*\(\()?"([a-z]+)":', out.stdout, re.MULTILINE) == EVERY_COMMAND


@pytest.mark.parametrize("name", EVERY_COMMAND)
def test_every_command_builds_and_answers_help(name):
    result = runner.invoke(app, [name, "--help"], prog_name="trainyard")
    assert result.exit_code == 0, result.output
    assert f"trainyard {name}" in result.output


def test_a_lazily_loaded_command_runs(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = runner.invoke(app, ["init", "--file", str(tmp_path / "job.yaml")], prog_name="trainyard")
    assert result.exit_code == 0, result.output
    assert "command:" in (tmp_path / "job.yaml").read_text()


def test_a_misspelled_command_is_still_answered_with_the_close_ones():
    result = runner.invoke(app, ["lss"], prog_name="trainyard")
    assert result.exit_code == 2 and "Did you mean 'ls'" in result.output


def test_a_command_loads_its_own_module_and_not_the_others():
    code = ("import sys\nfrom typer.main import get_command\nfrom trainyard.cli.main import app\n"
            "group = get_command(app)\nctx = group.make_context('trainyard', ['ls'], resilient_parsing=True)\n"
            "group.get_command(ctx, 'ls')\nprint(' '.join(m for m in sys.modules if m.startswith('trainyard.cli.')))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert "trainyard.cli.jobs" in loaded
    assert loaded.isdisjoint({"trainyard.cli.admin", "trainyard.cli.doctor", "trainyard.cli.pipelines",
                              "trainyard.cli.services", "trainyard.cli.tokens", "trainyard.cli.clusters"}), loaded
