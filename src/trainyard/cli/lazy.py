"""A command group that imports a command's module only when that command is asked for.

Building the whole CLI imported every command's module (rich's consoles and tables, the renderers,
doctor's and the admin's helpers) and turned every function's signature into click parameters, for a
process that runs one command. Click documents this as "lazy loading of subcommands": the group knows
the names, and ``get_command`` imports and builds the one it is asked for. ``--help`` and shell
completion ask for every command (they show each one's help), so they still load them all, and print
what they printed before.
"""

from __future__ import annotations

import importlib
import inspect

import typer
import typer.main

from trainyard.cli.toplevel import SuggestingGroup


class LazyGroup(SuggestingGroup):
    """A :class:`SuggestingGroup` whose commands are ``{name: "module:attribute"}`` in :attr:`lazy`, in the
    order ``--help`` lists them; an attribute is a command's function or a :class:`typer.Typer` of its own."""

    lazy: dict[str, str] = {}

    def list_commands(self, ctx) -> list[str]:  # noqa: ANN001
        return [*self.lazy, *(n for n in super().list_commands(ctx) if n not in self.lazy)]

    def get_command(self, ctx, cmd_name: str):  # noqa: ANN001, ANN201
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.commands[cmd_name] = build(cmd_name, self.lazy[cmd_name])
        return super().get_command(ctx, cmd_name)


def build(name: str, target: str):  # noqa: ANN201
    """The click command that ``app.command(name)`` or ``app.add_typer(sub, name=name)`` on the top-level app
    makes: registered so on a stand-in app with typer's defaults, as the top-level one has, and built by
    the same call that builds a whole app's commands."""
    module, _, attribute = target.partition(":")
    found = getattr(importlib.import_module(module), attribute)
    holder = typer.Typer(add_completion=False)
    if isinstance(found, typer.Typer):
        holder.add_typer(found, name=name)
    else:
        holder.command(name)(found)
    return reflowed(typer.main.get_group(holder).commands[name])


def reflowed(command):  # noqa: ANN001, ANN201
    """``command`` (and its subcommands) with each help paragraph one line, as :func:`reflow` writes it."""
    command.help = reflow(command.help)
    for sub in getattr(command, "commands", {}).values():
        reflowed(sub)
    return command


def reflow(text: str | None) -> str | None:
    """A docstring's paragraphs with their line breaks made spaces, for the terminal to wrap at its own width;
    a ``\b`` paragraph (examples) stays line by line. Typer joins the first paragraph's lines only: the rest
    showed the source's 110-column breaks mid-sentence, at any width."""
    if not text:
        return text
    body, cut, hidden = inspect.cleandoc(text).partition("\f")
    paragraphs = [p if p.startswith("\b") else " ".join(p.split()) for p in body.split("\n\n")]
    return "\n\n".join(paragraphs) + cut + hidden
