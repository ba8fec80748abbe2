"""`trainyard admin …` (users, teams, the first admin) and `trainyard audit`."""

from __future__ import annotations

import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from trainyard.cli.common import Output, client, console, err_console, handled, write
from trainyard.cli.tokens import print_new_token, when
from trainyard.errors import InvalidSpec, TrainyardError
from trainyard.spec.choices import ROLES

if TYPE_CHECKING:
    from trainyard.cli.safe_text import Table
    from trainyard.spec.identity import UserInfo

app = typer.Typer(no_args_is_help=True, help="Users and teams (admins only), and the first admin.")
user_app = typer.Typer(no_args_is_help=True,
                       help="Users: create (with a first token), list, show, team, disable, enable.")
team_app = typer.Typer(no_args_is_help=True, help="Teams: create, list.")
app.add_typer(user_app, name="user")
app.add_typer(team_app, name="team")
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]


@app.command()
def bootstrap(
    home: Annotated[Optional[Path], typer.Option(help="the server's state folder (default $TRAINYARD_HOME)")] = None,
    db: Annotated[Optional[str], typer.Option(help="the server's database URL (default: SQLite in the home)")] = None,
) -> None:
    """Create the first admin, straight in the server's database, unless one exists; prints its token last."""
    from trainyard.config import ServerSettings, home as default_home
    from trainyard.server import bootstrap_admin, other_database

    with handled():
        settings = ServerSettings(home=home or default_home(), db=db)
        theirs = other_database(settings)
        if theirs is not None:  # an admin in another database would be one that server never sees
            from trainyard.db_url import database_name

            ours = "the home's SQLite" if db is None else f"{database_name(db)} (--db)"
            raise TrainyardError(f"the server of {settings.home} uses the database {theirs}, not {ours}: "
                                 f"give the server's database with --db (its full URL)")
        made = bootstrap_admin(settings)
        if made is None:
            raise TrainyardError("an admin exists already: ask one for a user (trainyard admin user create)")
        name, token = made
        console.print(f"first admin {name!r} created; its token, shown this once:", highlight=False)
        write(token + "\n")


def users_table(users: list[UserInfo]) -> Table:
    from trainyard.cli.safe_text import Table

    table = Table("NAME", "ROLE", "TEAMS", "OS USER", "STATUS", "CREATED", box=None)
    for u in users:
        teams = ", ".join(f"{t} ({r})" for t, r in sorted(u.teams.items())) or "-"
        table.add_row(u.name, "admin" if u.admin else "-", teams, u.os_user or "-",
                      "disabled" if u.disabled else "active", when(u.created_at))
    return table


@user_app.command("create")
def user_create(
    name: Annotated[str, typer.Argument(help="user name")],
    team: Annotated[Optional[str], typer.Option("--team", help="its team (created if it does not exist)")] = None,
    role: Annotated[str, typer.Option("--role", help=f"one of: {', '.join(ROLES)}")] = "member",
    os_user: Annotated[Optional[str], typer.Option("--os-user", help="Unix account its jobs run as "
                                                   "(local engine, server run as root)")] = None,
) -> None:
    """Create a user; prints its first token once, as the last line."""
    with handled():
        made = client().identity.create_user(name, team=team, role=role, os_user=os_user)
        print_new_token(made.token)


@user_app.command("ls")
def user_ls(output: OutputOpt = Output.table) -> None:
    """Every user, with its teams and roles."""
    from trainyard.cli.listing import said_empty

    with handled():
        users = client().identity.users()
        if output == Output.json:
            write(json.dumps([u.model_dump(mode="json") for u in users], indent=2) + "\n")
        elif not said_empty(users, "users"):
            console.print(users_table(users))


@user_app.command("show")
def user_show(name: Annotated[str, typer.Argument()], output: OutputOpt = Output.table) -> None:
    """One user."""
    with handled():
        u = client().identity.user(name)
        if output == Output.json:
            write(u.model_dump_json(indent=2) + "\n")
        else:
            console.print(users_table([u]))


@user_app.command("disable")
def user_disable(name: Annotated[str, typer.Argument()]) -> None:
    """Disable a user: its tokens stop working at once (suspended, not revoked: `admin user enable` gives them
    back); no new work starts in its name; its jobs and history stay."""
    with handled():
        client().identity.disable_user(name)
        console.print(f"user {name} disabled", highlight=False)


@user_app.command("enable")
def user_enable(name: Annotated[str, typer.Argument()]) -> None:
    """Enable a disabled user again: its tokens that were not revoked and have not expired work again (disabling
    only suspended them; revoke with `token revoke` first any that should not), and new work may start in its name."""
    with handled():
        c = client()
        c.identity.enable_user(name)
        now = time.time()
        live = [f"{t.name} ({t.id})" for t in c.identity.tokens(user=name)
                if t.revoked_at is None and (t.expires_at is None or t.expires_at > now)]
        back = (f"its tokens work again: {', '.join(live)} (`trainyard token revoke ID` ends one)" if live else
                f"it has no live token: `trainyard token create --user {name} --name NAME` gives it one")
        console.print(f"user {name} enabled; {back}", highlight=False)


@user_app.command("account")
def user_account(
    name: Annotated[str, typer.Argument(help="user name")],
    os_user: Annotated[Optional[str], typer.Argument(help="the Unix account its jobs run as from now on")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="no account of its own: its jobs run as the server's")] = False,
) -> None:
    """Change the Unix account a user's jobs run as (local engine, server run as root). Attempts under way keep
    theirs; every later one (a retry, a requeue, a replica) runs as this one. Files its jobs wrote stay the old
    account's: `chown` them if the new one should have them."""
    if (os_user is None) == (not clear):
        err_console.print("[red]error:[/red] give an ACCOUNT, or --clear (not both)")
        raise typer.Exit(2)
    with handled():
        c = client()
        was = c.identity.user(name).os_user
        info = c.identity.set_os_user(name, os_user)
        now, before = (f"as {a}" if a else "as the server's own account" for a in (info.os_user, was))
        console.print(f"user {name}'s jobs run {now} from their next attempt on (they ran {before})", highlight=False)


@user_app.command("team")
def user_team(
    name: Annotated[str, typer.Argument(help="user name")],
    team: Annotated[str, typer.Argument(help="the team")],
    role: Annotated[str, typer.Option("--role", help="maintainer, member or viewer")] = "member",
    remove: Annotated[bool, typer.Option("--remove", help="take the user out of the team")] = False,
) -> None:
    """Put a user in a team, or change its role there; --remove takes it out (its jobs there stay)."""
    with handled():
        u = client().identity.set_membership(name, team, None if remove else role)
        teams = ", ".join(f"{t} ({r})" for t, r in sorted(u.teams.items())) or "no team"
        console.print(f"user {u.name}: {teams}", highlight=False)


@team_app.command("create")
def team_create(name: Annotated[str, typer.Argument()]) -> None:
    """Create a team (users join it with `admin user create --team` or `admin user team`)."""
    with handled():
        client().identity.create_team(name)
        console.print(f"team {name} created", highlight=False)


@team_app.command("ls")
def team_ls(output: OutputOpt = Output.table) -> None:
    """Teams with their members (yours only, unless you are an admin)."""
    from trainyard.cli.listing import said_empty
    from trainyard.cli.safe_text import Table

    with handled():
        teams = client().identity.teams()
        if output == Output.json:
            write(json.dumps([t.model_dump(mode="json") for t in teams], indent=2) + "\n")
            return
        if said_empty(teams, "teams"):
            return
        table = Table("TEAM", "MEMBERS", "CREATED", box=None)
        for t in teams:
            table.add_row(t.name, ", ".join(f"{u} ({r})" for u, r in sorted(t.members.items())) or "-",
                          when(t.created_at))
        console.print(table)


def parse_since(text: str) -> float:
    """``1h`` (that long ago), an ISO date or time, or a Unix time."""
    from trainyard.spec.identity import parse_duration

    try:
        return time.time() - parse_duration(text)
    except ValueError:
        pass
    try:
        unix = float(text)
    except ValueError:
        pass
    else:  # float() takes 'nan' and 'inf' too: a query no row can answer, sent to the server
        if math.isfinite(unix):
            return unix
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise InvalidSpec.flag("--since", f"{text!r}: write 1h, 2d, 2026-01-31, 2026-01-31T12:00 or a Unix time"
                               ) from None


def audit(
    user: Annotated[Optional[str], typer.Option("--user", help="only this user's changes")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="e.g. 1h, 7d, 2026-01-31")] = None,
    limit: Annotated[int, typer.Option(help="at most this many, the newest")] = 1000,
    output: OutputOpt = Output.table,
) -> None:
    """Who changed what, when and from where (an admin sees everyone's; others their own)."""
    from trainyard.cli.safe_text import Table

    with handled():
        entries = client().identity.audit(user=user, since=parse_since(since) if since else None, limit=limit)
        if output == Output.json:
            write(json.dumps([e.model_dump(mode="json") for e in entries], indent=2) + "\n")
            return
        table = Table("WHEN (UTC)", "USER", "FROM", "ACTION", "TARGET", "DETAIL", box=None)
        for e in entries:
            detail = ", ".join(f"{k}={v}" for k, v in (e.detail or {}).items() if v is not None)
            table.add_row(when(e.at), e.user, e.source or "-", e.action, e.target or "-", detail)
        console.print(table)
