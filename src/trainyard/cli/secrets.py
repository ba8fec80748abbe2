"""`trainyard secret …`: a team's secrets. A value is read from standard input, a file or a hidden
prompt — never from the command line, where `ps` and the shell's history would keep it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainyard.cli.common import Output, client, console, err_console, handled, write
from trainyard.cli.render import ago
from trainyard.errors import InvalidSpec, TrainyardError

app = typer.Typer(no_args_is_help=True, help="Your team's secrets: values its jobs read from their environment "
                  "(`secrets:` in a job spec), never shown again once set.")
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]
TeamOpt = Annotated[Optional[str], typer.Option("--team", help="whose (default: your first team); - for no team "
                                                "(an admin's own)")]


def read_value(from_file: Path | None) -> str:
    if from_file is not None:
        try:
            return from_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InvalidSpec(errors=[{"field": None, "line": None, "where": "--from-file",
                                       "message": f"{from_file}: {getattr(e, 'strerror', None) or e}"}]) from None
    if sys.stdin.isatty():
        return typer.prompt("value", hide_input=True)
    return sys.stdin.read().removesuffix("\n")  # `echo "$KEY" | trainyard secret set …` adds a newline


@app.command("set")
def set_(
    name: Annotated[str, typer.Argument(help="the secret's name, e.g. WANDB_API_KEY")],
    team: TeamOpt = None,
    from_file: Annotated[Optional[Path], typer.Option("--from-file", help="the value is this file's text "
                                                      "(a key file, a credentials file)")] = None,
) -> None:
    """Create or replace a secret; the value comes from standard input, --from-file or a hidden prompt."""
    with handled():
        value = read_value(from_file)
        if not value:
            raise TrainyardError("no value given: pipe it in, use --from-file, or type it at the prompt")
        info = client().secrets.set(name, value, team=team)
        where = f"team {info.team}" if info.team else "no team"
        err_console.print(f"secret {info.name} of {where} set ({info.length} characters); jobs read it with "
                          f"`secrets: [{info.name}]`" if _env_like(info.name) else
                          f"secret {info.name} of {where} set ({info.length} characters); jobs read it with "
                          f"`secrets: {{VARIABLE: {info.name}}}`", highlight=False)


def _env_like(name: str) -> bool:
    return name.replace("_", "a").isalnum() and name.isascii() and not name[0].isdigit()


@app.command("ls")
def ls(team: TeamOpt = None, output: OutputOpt = Output.table) -> None:
    """Secrets of your teams (or one): name, team, length, who set each and when. Never their values."""
    with handled():
        found = client().secrets.list(team)
        if output == Output.json:
            write(json.dumps([s.model_dump(mode="json") for s in found], indent=2) + "\n")
            return
        from trainyard.cli.listing import said_empty
        from trainyard.cli.safe_text import Table

        if said_empty(found, "secrets", {"--team": team}):
            return
        table = Table("NAME", "TEAM", "LENGTH", "SET BY", "UPDATED", box=None)
        for s in found:
            table.add_row(s.name, s.team or "-", str(s.length), s.updated_by or "-", ago(s.updated_at))
        console.print(table)


@app.command("rm")
def rm(name: Annotated[str, typer.Argument(help="the secret's name")], team: TeamOpt = None) -> None:
    """Delete a secret: jobs naming it are refused from now on, and attempts not yet started fail."""
    with handled():
        client().secrets.delete(name, team=team)
        console.print(f"secret {name} deleted", highlight=False)


@app.command()
def rotate() -> None:
    """Re-seal every secret with the key file's first key (an admin's).

    First put a new key on the first line of the server's key file (`secrets.key` in its home), keeping the old
    ones below, on every server sharing it; after this, the old lines can go."""
    with handled():
        done = client().secrets.rotate()
        console.print(f"{done['resealed']} secret(s) re-sealed with the first of {done['keys']} key(s); the "
                      "other keys can leave the key file now (on every server sharing it)", highlight=False)
