"""`trainyard init`: a commented job.yaml for the current folder that runs as it is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from trainyard.cli.common import console, handled

MAIN_NAMES = ("train.py", "main.py", "run.py", "app.py")


def init(
    file: Annotated[Path, typer.Option("--file", "-f", help="where to write the spec")] = Path("job.yaml"),
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing file")] = False,
) -> None:
    """Write a commented job spec for this folder: its main script, and the environment from
    requirements.txt or pyproject.toml. Run it with `trainyard run job.yaml --follow`."""
    from trainyard.errors import InvalidSpec
    from trainyard.spec.loader import parse_job

    with handled():
        if file.exists() and not force:
            raise InvalidSpec(errors=[{"field": "", "line": None, "where": str(file),
                                       "message": "already exists; pass --force to overwrite it"}])
        folder = Path.cwd()
        text, found = spec_text(folder)
        parse_job(text, str(file))  # what init writes must run as it is
        file.write_text(text)
        console.print(f"wrote {file}: {'; '.join(found)}", highlight=False)
        console.print(f"run it with: [bold]trainyard run {file} --follow[/bold]", highlight=False)


def main_script(folder: Path) -> Path | None:
    """The script a job here most likely runs: a conventional name, else the one with a ``__main__`` guard,
    else the only script."""
    for name in MAIN_NAMES:
        if (folder / name).is_file():
            return folder / name
    scripts = sorted(p for p in folder.glob("*.py") if p.is_file() and not p.name.startswith(("test_", "setup")))
    guarded = [p for p in scripts if "__main__" in p.read_text(errors="replace")]
    if len(guarded) == 1:
        return guarded[0]
    return scripts[0] if len(scripts) == 1 else None


def pyproject_dependencies(path: Path) -> list[str] | None:
    try:
        import tomllib
    except ImportError:  # Python 3.10: no TOML reader in the standard library
        return None
    try:
        return list(tomllib.loads(path.read_text()).get("project", {}).get("dependencies", []))
    except (OSError, ValueError):
        return None


def spec_text(folder: Path) -> tuple[str, list[str]]:
    """The spec's YAML, with comments, and what was found (for the message)."""
    import yaml

    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name).strip("-._")[:63] or "job"
    script = main_script(folder)
    found = []
    if script:
        command = f"[python, {script.name}]"
        found.append(f"command: python {script.name}")
    else:
        command = "python -c \"print('hello from trainyard')\"   # no main script found: put yours here"
        found.append("no main script found (edit `command`)")
    lines = [
        "# A trainyard job, written by `trainyard init`. Run it: trainyard run job.yaml --follow",
        "# Every field is described in the README (\"A job spec\"); `trainyard run --dry-run …` prints specs too.",
        f"name: {name}",
        "# What runs: a list is an argv, a string runs in bash. {{params.x}} is replaced by a param.",
        f"command: {command}",
        "# This folder is snapshotted when you submit; .gitignore and .trainyardignore are respected.",
        "workdir: .",
        "# params: {lr: 0.1}        # change with -p lr=0.01; the job reads them from TRAINYARD_PARAMS",
    ]
    deps = pyproject_dependencies(folder / "pyproject.toml") if (folder / "pyproject.toml").is_file() else None
    if (folder / "requirements.txt").is_file():
        lines += ["env:", "  requirements: requirements.txt   # a virtualenv built from it, cached by content hash"]
        found.append("environment from requirements.txt")
    elif deps:
        pip = yaml.safe_dump(deps, default_flow_style=True, width=10_000).strip()
        lines += ["env:", f"  pip: {pip}   # pyproject.toml's dependencies; a cached virtualenv"]
        found.append("environment from pyproject.toml")
    else:
        lines += ["# env: {pip: [numpy]}     # packages for a virtualenv; without env, python is the server's"]
    lines += [
        "resources:",
        "  cpu: 1",
        "  memory: 1Gi             # enforced on the whole process tree",
        "  # gpu: 1",
        "  # gpu_type: A100",
        "# retry: {max: 2}         # retries after errors, out-of-memory and lost nodes",
        "# timeout: 2h",
        "",
    ]
    return "\n".join(lines), found
