"""`trainyard token …` and `trainyard login`: API tokens, shown once and never again."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from trainyard.cli.common import Output, client, console, err_console, handled, write
from trainyard.cli.render import ago
from trainyard.errors import InvalidSpec, TrainyardError

if TYPE_CHECKING:
    from trainyard.cli.safe_text import Table
    from trainyard.spec.identity import NewToken, TokenInfo

app = typer.Typer(no_args_is_help=True, help="Your API tokens: create (shown once), list, revoke.")
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]


def when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M") if ts else "-"


def print_new_token(token: NewToken) -> None:
    """What a new token is, then the token itself alone on the last line (scripts take that line)."""
    expires = f"expires {when(token.info.expires_at)} UTC" if token.info.expires_at else "never expires"
    err_console.print(f"token {token.info.id} ({token.info.name!r}) of {token.info.user}, {expires}; "
                      "it is shown this once: keep it secret", highlight=False)
    write(token.secret + "\n")


@app.command()
def create(
    name: Annotated[str, typer.Option("--name", help="what it is for, e.g. laptop")],
    expires: Annotated[Optional[str], typer.Option("--expires", help="lifetime, e.g. 90d, 12h, 2w; default: never")] = None,
    user: Annotated[Optional[str], typer.Option("--user", help="an admin: for this user")] = None,
) -> None:
    """Create a token; prints it once, as the last line."""
    from trainyard.spec.identity import MAX_EXPIRY_S, parse_duration

    with handled():
        try:
            seconds = parse_duration(expires) if expires else None
            if seconds is not None and not 60 <= seconds <= MAX_EXPIRY_S:  # the server's bounds, said in days
                raise ValueError(f"{expires!r}: at least a minute (1m)" if seconds < 60 else
                                 f"{expires!r}: at most 5 years ({MAX_EXPIRY_S // 86400}d)")
        except ValueError as e:
            raise InvalidSpec.flag("--expires", str(e)) from None
        print_new_token(client().identity.create_token(name, expires_in=seconds, user=user))


def tokens_table(tokens: list[TokenInfo]) -> Table:
    from rich.table import Column

    from trainyard.cli.safe_text import Table

    # the id is what `token revoke` takes: never cut
    table = Table(Column("ID", no_wrap=True), "USER", "NAME", "CREATED", "LAST USED", "EXPIRES", "REVOKED",
                  box=None)
    for t in tokens:
        table.add_row(t.id, t.user, t.name, when(t.created_at), ago(t.last_used_at) if t.last_used_at else "never",
                      when(t.expires_at), when(t.revoked_at))
    return table


@app.command("ls")
def ls(user: Annotated[Optional[str], typer.Option("--user", help="an admin: this user's, or * for all")] = None,
       output: OutputOpt = Output.table) -> None:
    """Your tokens: name, created, last used, expiry (never the tokens themselves)."""
    from trainyard.cli.listing import said_empty

    with handled():
        found = client().identity.tokens(user)
        if output == Output.json:
            write(json.dumps([t.model_dump(mode="json") for t in found], indent=2) + "\n")
        elif not said_empty(found, "tokens", {"--user": user}):
            console.print(tokens_table(found))


@app.command()
def revoke(token_id: Annotated[str, typer.Argument(help="the token's ID (from `trainyard token ls`)")]) -> None:
    """Revoke a token: it gets 401 from now on."""
    with handled():
        info = client().identity.revoke_token(token_id)
        console.print(f"token {info.id} ({info.name!r}) of {info.user} revoked", highlight=False)


@app.command("print")
def print_token() -> None:
    """Print the token this CLI sends to its server ($TRAINYARD_TOKEN, else the one `trainyard login` saved for
    it, else the local server's own), for tools that call the API or a service:
    curl -H "Authorization: Bearer $(trainyard token print)" SERVER/serve/NAME/…"""
    with handled():
        c = client()
        if not c.http.token:
            raise TrainyardError(f"no token for {c.server}: set TRAINYARD_TOKEN, or run `trainyard login --server "
                                 f"{c.server}`")
        write(c.http.token + "\n")


def login(
    server: Annotated[str, typer.Option("--server", help="the server's URL, e.g. https://trainyard.example:8000")],
) -> None:
    """Save a server and your token for the CLI and SDK (a 0600 file in $TRAINYARD_HOME).

    The token comes from $TRAINYARD_TOKEN, else standard input when it is not a terminal, else a
    prompt that does not echo it: never from the command line, where `ps` would show it."""
    from trainyard.config import client_token, home
    from trainyard.home import save_login
    from trainyard.sdk.client import Client

    with handled():
        token = client_token()
        if token is None:
            token = sys.stdin.readline().strip() if not sys.stdin.isatty() else typer.prompt("token", hide_input=True)
        if not token:
            raise TrainyardError("no token given: set TRAINYARD_TOKEN, pipe it in, or type it at the prompt")
        url = server.rstrip("/")
        with Client(url, token=token) as c:
            me = c.identity.whoami()
        path = save_login(home(), url, token)
        console.print(f"logged in to {url} as {me.user}; saved in {path}", highlight=False)
