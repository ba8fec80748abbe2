"""The top-level command itself: `--version`, an unknown command answered with the closest ones, and a number
flag typer refused said as trainyard says a bad flag."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Annotated, Optional

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

    def invoke(self, ctx):  # noqa: ANN001, ANN201
        # every command's flags are read below some group's invoke: this one place says them all
        try:
            return super().invoke(ctx)
        except Exception as e:
            said = number_refused(e)
            if said is None:
                raise
            from rich.markup import escape

            from trainyard.cli.output import err_console

            err_console.print(f"[red]error:[/red] {escape(said)}", highlight=False)
            raise typer.Exit(2) from None


class OutOfRange(typer.BadParameter):
    """A number flag's value that :func:`in_range` refused; :func:`number_refused` says it."""

    def __init__(self, value: float, bounds: dict[str, float]) -> None:
        super().__init__(f"{value}: out of range")
        self.value, self.bounds = value, bounds


def in_range(**bounds: float) -> Callable[[Optional[float]], Optional[float]]:
    """A float flag's ``callback`` that refuses a value not finite or outside ``bounds`` (pydantic's ``gt``, ``ge``,
    ``lt``, ``le``), said as a refusal of typer's own ``min``/``max`` is: for a range those cannot hold, an open
    end (``gt=0``: a target of 0 requests per replica would divide by it)."""
    import math
    import operator

    within = {"gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le}

    def check(value: Optional[float]) -> Optional[float]:
        # NaN fails every comparison, so `not` each one: it is refused as out of range, never let through
        if value is not None and (not math.isfinite(value) or any(not within[k](value, b) for k, b in bounds.items())):
            raise OutOfRange(value, bounds)
        return value

    return check


def number_refused(e: Exception) -> str | None:
    """``--timeout: must be a finite number from 0 to 604800 (not 'nan')`` for a number flag's value that typer
    refused (or :func:`in_range`), as the API says a query parameter's; None for any other error. Typer's own words
    were pydantic's in a boxed panel, a NaN's 'Input should be less than or equal to 604800'."""
    from trainyard.spec.number_words import NUMBER_ERRORS, is_int, must_be, shown

    param = getattr(e, "param", None)
    if isinstance(e, OutOfRange) and param is not None:
        return f"{_flag(param)}: {must_be(False, e.bounds)} (not {shown(e.value)!r})"
    errors = getattr(e.__cause__, "errors", None)
    if type(e).__name__ != "BadParameter" or param is None or errors is None:
        return None
    found = errors()
    if not found or found[0]["type"] not in NUMBER_ERRORS:
        return None
    given = found[0].get("input")
    bounds = {"ge": getattr(param, "min", None), "le": getattr(param, "max", None)}  # click's min and max hold
    whole = is_int(getattr(getattr(param, "type_descriptor", None), "annotation", None))
    said = f" (not {given[:40]!r})" if isinstance(given, str) else f" (not {given})" if given is not None else ""
    return f"{_flag(param)}: {must_be(whole, bounds)}{said}"


def _flag(param) -> str:  # noqa: ANN001
    return (param.human_readable_name if getattr(param, "param_type_name", "") == "argument"
            else max(getattr(param, "opts", None) or [param.name or ""], key=len))  # --timeout, not -t


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"trainyard {trainyard.__version__}")
        raise typer.Exit()


def main(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="print the version and exit")] = False,
) -> None:
    """Run training jobs: say what a job needs, trainyard finds room for it and runs it."""
