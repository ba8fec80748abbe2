"""`trainyard notify …`: have one of the server's webhooks told when jobs end (a chat, an alerting hook)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from trainyard.cli.common import Output, client, console, err_console, handled, write
from trainyard.cli.render import ago

app = typer.Typer(no_args_is_help=True, help="Webhooks told when jobs end: subscribe, list, remove.")
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]


@app.command()
def add(webhook: Annotated[str, typer.Argument(help="a webhook of the server's (`trainyard notify webhooks`)")],
        on: Annotated[str, typer.Option(help="which ends, comma-separated: succeeded, failed, cancelled")] = "failed",
        team: Annotated[Optional[str], typer.Option(help="every job of this team of yours (default: only "
                                                    "your own jobs)")] = None,
        all_jobs: Annotated[bool, typer.Option("--all", help="every job (admins)")] = False,
        queue: Annotated[Optional[str], typer.Option(help="only jobs of this queue")] = None,
        name: Annotated[Optional[str], typer.Option(help="only jobs whose name matches this glob, e.g. "
                                                    "'nightly-*'")] = None,
        label: Annotated[Optional[list[str]], typer.Option(
            "--label", "-l", help="only jobs these labels select: key=value, key!=value, 'key in (a,b)', key, !key "
            "(repeat: all of them)")] = None,
        pipelines: Annotated[bool, typer.Option("--pipelines", help="pipeline runs' ends instead of jobs' "
                                                "(a run's steps are jobs)")] = False) -> None:
    """Subscribe WEBHOOK to the ends of your jobs, a team's (--team) or all (--all)."""
    if team is not None and all_jobs:
        raise typer.BadParameter("--team or --all, not both", param_hint="--all")
    scope = "all" if all_jobs else "team" if team is not None else "mine"
    with handled():
        sub = client().notify.subscribe(webhook, on=[e.strip() for e in on.split(",") if e.strip()], scope=scope,
                                        team=team, queue=queue, name=name, labels=",".join(label) if label else None,
                                        kind="pipeline_run" if pipelines else "job")
        things = "jobs" if sub.kind == "job" else "pipeline runs"
        whose = {"mine": f"your {things}", "team": f"team {sub.team}'s {things}",
                 "all": f"every one of the {things}"}[sub.scope.value]
        narrowed = "".join(f", {k} {v}" for k, v in (("queue", sub.queue), ("named", sub.name),
                                                     ("labelled", sub.labels)) if v)
        console.print(f"subscription {sub.id}: {sub.webhook} is told when {whose}{narrowed} end "
                      f"{' or '.join(sub.on)}", highlight=False, soft_wrap=True)


@app.command("ls")
def ls(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="at most this many, newest first")] = 50,
    all_: Annotated[bool, typer.Option("--all", "-a", help="every one, page after page")] = False,
    after: Annotated[Optional[str], typer.Option("--after", help="continue a listing where it stopped")] = None,
    output: Annotated[Output, typer.Option("--output", "-o")] = Output.table,
) -> None:
    """Your subscriptions (an admin's: everyone's), newest first, with how their deliveries went; many come in
    pages (--after, --all)."""
    from trainyard.cli.listing import paged_list, said_empty
    from trainyard.cli.safe_text import Table

    with handled():
        subs = paged_list(client().notify.page, limit=None if all_ else limit, after=after)
        if output == Output.json:
            write(json.dumps([s.model_dump(mode="json") for s in subs], indent=2) + "\n")
            return
        if said_empty(subs, "subscriptions", {"--after": after}):
            return
        table = Table(box=None, header_style="bold")
        for col in ("ID", "WEBHOOK", "ON", "JOBS", "SENT", "PENDING", "FAILED", "OWNER"):
            table.add_column(col, no_wrap=col in ("ID", "WEBHOOK"))
        for s in subs:
            jobs = {"mine": "mine", "team": f"team {s.team}", "all": "all"}[s.scope.value]
            jobs += "" if s.kind == "job" else " (pipeline runs)"
            jobs += "".join(f", {k} {v}" for k, v in (("queue", s.queue), ("named", s.name), ("labelled", s.labels))
                            if v)
            table.add_row(s.id, s.webhook, ",".join(s.on), jobs, str(s.delivered), str(s.pending), str(s.failed),
                          s.owner)
        console.print(table)


@app.command()
def deliveries(subscription: str, output: OutputOpt = Output.table) -> None:
    """A subscription's latest deliveries: sent, pending (tried again later) or failed, and why."""
    from trainyard.cli.safe_text import Table

    with handled():
        found = client().notify.deliveries(subscription)
        if output == Output.json:
            write(json.dumps([d.model_dump(mode="json") for d in found], indent=2) + "\n")
            return
        table = Table(box=None, header_style="bold")
        for col in ("JOB/RUN", "EVENT", "STATUS", "TRIES", "WHEN", "ERROR"):
            table.add_column(col, overflow="fold")
        for d in found:
            table.add_row(d.object_id, d.event, d.status, str(d.attempts), ago(d.sent_at or d.created_at),
                          d.last_error or "")
        console.print(table)


@app.command()
def webhooks() -> None:
    """The server's webhooks you may subscribe (their addresses stay with the server)."""
    with handled():
        hooks = client().notify.webhooks()
        if not hooks:  # else nothing at all is printed, which reads as a command that did not work
            err_console.print("no webhooks you may use: an admin names them under `webhooks:` in the server's "
                              "--config (README, Notifications)", highlight=False, markup=False)
        for h in hooks:
            teams = f" (teams {', '.join(h.teams)})" if h.teams else ""
            console.print(f"{h.name}  {h.format}{teams}", highlight=False)


@app.command("rm")
def rm(subscription: str) -> None:
    """Remove a subscription; what it still owed is not sent."""
    with handled():
        client().notify.delete(subscription)
        console.print(f"subscription {subscription} removed", highlight=False)
