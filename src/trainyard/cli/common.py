"""What every command shares: the console, the client, and turning errors into exit codes."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum

import typer
from rich.markup import escape
from trainyard.cli.output import console, err_console, write  # noqa: F401  (re-exported for the commands)
from trainyard.errors import InvalidSpec, TrainyardError, Unauthorized, WaitTimeout


class Output(str, Enum):
    table = "table"
    json = "json"


@contextmanager
def handled() -> Iterator[None]:
    """Print trainyard errors plainly (no traceback) and exit non-zero; warnings (a large code
    snapshot) as they happen, before the upload they precede."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", UserWarning)
            warnings.showwarning = _show_warning
            yield
    except InvalidSpec as e:
        # "invalid spec" heads errors found in a spec's fields; a missing file, a bad flag, a query parameter or
        # a server's config is said as it is
        if not e.errors:
            err_console.print(f"[red]error:[/red] {escape(e.message)}", highlight=False)
        in_spec = any((item.get("field") or item.get("line")) and not item.get("in") for item in e.errors)
        if in_spec:
            err_console.print("[red]error:[/red] invalid spec")
        for item in sorted(e.errors, key=lambda item: not item.get("in")):
            head = "  " if in_spec and not item.get("in") else "[red]error:[/red] "
            err_console.print(head, end="")
            err_console.print(InvalidSpec.said(item), markup=False, highlight=False)
        raise typer.Exit(2) from None
    except WaitTimeout as e:  # as timeout(1) exits: a script tells "gave up waiting" from "it failed"
        err_console.print(f"[red]timeout:[/red] {escape(e.message)}", highlight=False)
        raise typer.Exit(124) from None
    except TrainyardError as e:
        err_console.print(f"[red]error:[/red] {escape(e.message)}", highlight=False)
        if isinstance(e, Unauthorized):
            err_console.print(f"[yellow]hint:[/yellow] {escape(unauthorized_hint())}", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def as_flags(e: InvalidSpec, flags: dict[str, str]) -> InvalidSpec:
    """``e``, a model's errors in the fields a command's options filled, said as the flags that set them (``--cpu:
    …``, exit 2), not as a spec the user never wrote. ``flags`` maps a field (or one it lies under: ``quota.gpu``
    for ``quota.gpu.A100``) to its flag; a field not there reads ``--field-name``. An error of no one field (``adapt_min
    (5) is more than adapt_max (2)``) has the fields it names said as their flags."""
    import re

    said = []
    for err in e.errors:
        field = str(err.get("field") or "")
        if not field:
            message = str(err["message"])
            for name in sorted(flags, key=len, reverse=True):
                message = re.sub(rf"\b{re.escape(name)}\b", flags[name], message)
            said.append({"field": "", "line": None, "where": "", "message": message})
        else:
            under = [f for f in flags if field == f or field.startswith(f + ".")]
            flag = flags[max(under, key=len)] if under else "--" + field.split(".")[0].replace("_", "-")
            said += InvalidSpec.flag(flag, str(err["message"])).errors
    return InvalidSpec(errors=said)


def unauthorized_hint() -> str:
    """What to do about a 401, by which token this client sent (never the token itself)."""
    from trainyard.home import LOGIN_FILE, read_login
    from trainyard.locations import client_token, home, server_url

    refused = "it is wrong, revoked or expired, or its user is disabled"
    if client_token():
        return (f"the server refused the token in TRAINYARD_TOKEN: {refused}; set another, or unset it and run "
                "`trainyard login --server URL` (a token saved per server)")
    login = read_login()
    if login and server_url() in (None, login["server"]):
        return (f"the server refused the token `trainyard login` saved in {home() / LOGIN_FILE}: {refused}; log in "
                f"with a new one: trainyard login --server {login['server']}")
    return Unauthorized.HINT


def _show_warning(message, category, *_args, **_kwargs) -> None:  # noqa: ANN001
    err_console.print(f"[yellow]warning:[/yellow] {escape(str(message))}", highlight=False)


def client():  # noqa: ANN201
    from trainyard.sdk.client import Client

    _say_server_starts()
    return Client()


def _say_server_starts() -> None:
    """Show on stderr what the SDK logs when it starts the embedded default's server: the first call on a
    machine otherwise waits several seconds without a word."""
    import logging

    class ToStderr(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            err_console.print(record.getMessage(), markup=False, highlight=False)

    logger = logging.getLogger("trainyard.sdk.discovery")
    if not logger.handlers:
        logger.addHandler(ToStderr())
        logger.setLevel(logging.INFO)
        logger.propagate = False


WAIT_MAX = 7 * 24 * 3600.0  # a --timeout beyond a week is a mistake (or an infinity), not a plan


def delete_each(keys: list[str], delete, label: str = "") -> None:  # noqa: ANN001
    """``delete(key)`` for each of ``keys``: ``deleted LABEL KEY`` on stdout per key deleted (see :func:`each`)."""
    def deleted(key: str) -> str:
        delete(key)
        return f"deleted {label}{key}"

    each(keys, deleted, "deleting", "not deleted")


def each(keys: list[str], act, doing: str, not_done: str) -> None:  # noqa: ANN001
    """``act(key)`` for each of ``keys``, printing the line it returns (if any) on stdout, why not on stderr
    (and on with the next); exit 1 with a count (``N of M NOT_DONE``) if any was refused. Many keys (from an
    ``ls --ids``): a bar on stderr, ``doing``."""
    from rich.progress import Progress

    failed = 0
    with Progress(console=err_console, transient=True, disable=len(keys) < 20) as bar:
        task = bar.add_task(doing, total=len(keys))
        for key in keys:
            try:
                with handled():
                    line = act(key)
            except typer.Exit:
                failed += 1
            else:
                if line is not None:
                    console.print(line, highlight=False)
            bar.advance(task)
    if failed:
        err_console.print(f"{failed} of {len(keys)} {not_done}", highlight=False)
        raise typer.Exit(1)


def read_ids(args: list[str] | None) -> list[str]:
    """Ids as given, ``-`` standing for those on stdin; each once, in order; maybe none."""
    import sys

    return list(dict.fromkeys(i for arg in args or [] for i in (sys.stdin.read().split() if arg == "-" else [arg])))


def ids_of(args: list[str] | None, none_is_done: bool = False) -> list[str]:
    """Ids as given, ``-`` standing for those on stdin (``trainyard ls --ids``); each once, in order.
    ``none_is_done``: no id at all is nothing to do (exit 0, said on stderr), not a usage error: the cleanup
    ``trainyard rm $(trainyard ls … --ids --all)`` finds nothing to clean most nights."""
    ids = read_ids(args)
    if not ids and none_is_done:
        err_console.print("nothing to do: no ids given", highlight=False)
        raise typer.Exit(0)
    if not ids:
        err_console.print("[red]error:[/red] no ids (- read none from stdin)")
        raise typer.Exit(2)
    return ids
