"""The top-level command itself: `--version`, and an unknown command answered with the closest ones."""

from __future__ import annotations

import difflib
from typing import Annotated

import typer
from typer.core import TyperGroup

import trainyard


class SuggestingGroup(TyperGroup):
    """A command group that answers a misspelled command with the commands it may have meant."""

    def resolve_command(self, ctx, args: list[str]):  # noqa: ANN001, ANN201
        try:
            return super().resolve_command(ctx, args)
        except Exception as e:  # the UsageError of whichever click typer runs on (it may vendor its own)
            name = args[0] if args else ""
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            if type(e).__name__ != "UsageError" or not close:
                raise
            raise type(e)(f"No such command {name!r}. Did you mean {' or '.join(repr(c) for c in close)}?",
                          ctx) from None


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"trainyard {trainyard.__version__}")
        raise typer.Exit()


def main(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="print the version and exit")] = False,
) -> None:
    """Run training jobs: say what a job needs, trainyard finds room for it and runs it."""
