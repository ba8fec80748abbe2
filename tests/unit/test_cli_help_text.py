"""Every command's `--help` reads as sentences at any width: no line of a description ends where the docstring's
source line did (typer keeps the line breaks of every paragraph past the first), and ``\\b`` examples keep theirs."""

from __future__ import annotations

import inspect

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from trainyard.cli.main import app

WIDTH = 200
runner = CliRunner()


def every_command() -> list[tuple[list[str], object]]:
    found, root = [], get_command(app)

    def walk(cmd, path: list[str]) -> None:  # noqa: ANN001
        found.append((path, cmd))
        if hasattr(cmd, "list_commands"):
            ctx = cmd.context_class(cmd, info_name=path[-1] if path else "trainyard")
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])

    walk(root, [])
    return found


COMMANDS = every_command()


def kept_lines(help_text: str | None) -> set[str]:
    """The lines of the ``\\b`` paragraphs (examples, tables), which are meant to stay as written."""
    paragraphs = inspect.cleandoc(help_text or "").split("\n\n")
    return {line.strip() for p in paragraphs if p.startswith("\b") for line in p.splitlines()}


def broken_lines(output: str, kept: set[str]) -> list[str]:
    """Lines of the description (outside the boxes) followed by one whose first word would have fitted on them:
    broken by the source, not by the terminal."""
    lines = [line.rstrip() for line in output.splitlines()]
    found = []
    for a, b in zip(lines, lines[1:]):
        if not a.strip() or not b.strip() or a.lstrip()[:1] in "╭│╰" or b.lstrip()[:1] in "╭│╰":
            continue
        if a.strip() in kept or b.strip() in kept or a.lstrip().startswith("Usage:"):
            continue
        if len(a) + 1 + len(b.split()[0]) < WIDTH - 4:
            found.append(f"{a.strip()[-50:]!r} / {b.strip()[:30]!r}")
    return found


def test_the_walk_finds_the_nested_commands():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"run", "wait", "pipeline rm", "admin user create", "secret rotate"} <= names and len(names) > 90


@pytest.mark.parametrize("path, cmd", COMMANDS, ids=[" ".join(p) or "trainyard" for p, _ in COMMANDS])
def test_help_is_broken_only_by_the_terminal(path, cmd):
    result = runner.invoke(app, [*path, "--help"], prog_name="trainyard", env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    assert broken_lines(result.output, kept_lines(cmd.help)) == []
    # an option's or argument's help is wrapped in its box's column: a line break of its own would show there
    assert [p.name for p in cmd.params if "\n" in (getattr(p, "help", None) or "")] == []


def test_examples_keep_their_lines():
    result = runner.invoke(app, ["run", "--help"], prog_name="trainyard", env={"COLUMNS": str(WIDTH)})
    text = "\n".join(line.rstrip() for line in result.output.splitlines())
    assert "\n   trainyard run job.yaml -p lr=0.1\n   trainyard run train.py -- --lr 0.1" in text
    assert "go into its cell tagged `parameters`, and the executed notebook" in text
