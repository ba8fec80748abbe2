"""`trainyard schedule …`: a job submitted again and again on a cron."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from trainyard.cli.common import Output, client, console, handled, write
from trainyard.cli.toplevel import SuggestingGroup

if TYPE_CHECKING:
    from trainyard.spec.schedule import ScheduleInfo, ScheduleRun, ScheduleSpec

app = typer.Typer(no_args_is_help=True, cls=SuggestingGroup,
                  help="Schedules: a job submitted again and again on a cron.")
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]
WRAP_ONLY = ("--name", "--timezone", "--concurrency")  # options of `create --cron`: a schedule file says them itself


@app.command()
def create(spec: Annotated[Path, typer.Argument(help="the schedule's YAML; with --cron, a job spec to schedule")],
           cron: Annotated[Optional[str], typer.Option(help="SPEC is then a job spec, scheduled on this "
                                                       "cron: '0 3 * * *', '@daily'")] = None,
           name: Annotated[Optional[str], typer.Option(help="with --cron: the schedule's name "
                                                       "(default: the job's)")] = None,
           timezone: Annotated[Optional[str], typer.Option(help="with --cron: the cron's clock, e.g. "
                                                           "Europe/Paris (default UTC)")] = None,
           concurrency: Annotated[Optional[str], typer.Option(help="with --cron: forbid (default), allow or "
                                                              "replace")] = None,
           output: OutputOpt = Output.table) -> None:
    """Create a schedule: `name`, `cron`, `timezone`, `concurrency` (forbid, allow, replace),
    `starting_deadline`, `suspend`, and the job spec under `job:`, whose command may use
    {{params.scheduled_at}}. Or schedule a plain job spec: `trainyard schedule create job.yaml --cron '0 3 * * *'`."""
    if cron is None:
        given = [flag for flag, value in zip(WRAP_ONLY, (name, timezone, concurrency)) if value is not None]
        if given:
            raise typer.BadParameter(f"{', '.join(given)} go with --cron (a schedule file says them itself)",
                                     param_hint=given[0])
    with handled():
        from trainyard.cli.runspec import placed_at
        from trainyard.sdk.schedules import job_schedule, load_schedule

        # read and checked before any server is asked (or started)
        wanted = load_schedule(spec) if cron is None else \
            job_schedule(spec, cron, name=name, timezone=timezone, concurrency=concurrency)
        with placed_at(*_where(spec, wanted, cron)):
            info = client().schedules.create(wanted, base_dir=spec.resolve().parent)
        if output == Output.json:
            write(info.model_dump_json(indent=2) + "\n")
            return
        console.print(f"schedule [bold]{info.name}[/bold] ({info.id}): {_when(info)}, {_next(info)}",
                      highlight=False, soft_wrap=True)


@app.command("ls")
def ls(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="at most this many, newest first")] = 50,
    all_: Annotated[bool, typer.Option("--all", "-a", help="every one, page after page")] = False,
    after: Annotated[Optional[str], typer.Option("--after", help="continue a listing where it stopped")] = None,
    output: OutputOpt = Output.table,
) -> None:
    """Schedules, newest first, with their next fire and how the last one went; many come in pages (--after,
    --all)."""
    from trainyard.cli.listing import paged_list, said_empty
    from trainyard.cli.safe_text import Table
    from rich.text import Text

    with handled():
        infos = paged_list(client().schedules.page, limit=None if all_ else limit, after=after)
        if output == Output.json:
            write(json.dumps([s.model_dump(mode="json") for s in infos], indent=2) + "\n")
            return
        if said_empty(infos, "schedules", {"--after": after}):
            return
        # what fits 80 columns: the id, the team and the policy are in `schedule show`
        table = Table(box=None, header_style="bold")
        for col in ("NAME", "CRON", "NEXT", "LAST", "ACTIVE", "OWNER"):
            table.add_column(col, no_wrap=col != "CRON")
        for s in infos:
            last = s.runs[0] if s.runs else None
            table.add_row(s.name, Text(f"{s.spec.cron}\n{_when(s)}"), _next(s, bare=True, short=True),
                          "-" if last is None else " ".join(filter(None, (last.outcome, last.job_id or last.run_id))),
                          str(len(s.active)), s.owner or "-")
        console.print(table)


@app.command()
def show(schedule: str, output: OutputOpt = Output.table) -> None:
    """One schedule: its cron, policy, next fire, and its latest fires, newest first."""
    from trainyard.cli.safe_text import Table
    from rich.text import Text

    with handled():
        info = client().schedules.get(schedule)
        if output == Output.json:
            write(info.model_dump_json(indent=2) + "\n")
            return
        spec = info.spec
        console.print(f"schedule [bold]{info.name}[/bold] ({info.id})", highlight=False)
        for label, value in (("cron", f"{spec.cron}: {_when(info)}"), ("next", _next(info, bare=True)),
                             ("concurrency", spec.concurrency.value),
                             ("starting deadline", f"{spec.starting_deadline:g}s"),
                             ("active", ", ".join(info.active) or "-"),
                             ("owner", f"{info.owner or '-'} (team {info.team or '-'})")):
            console.print(f"  {label + ':':<19}{value}", highlight=False, markup=False, soft_wrap=True)
        if info.held:  # the server's own pause: resume is refused until the schedule is made again
            console.print(f"  {'held paused:':<19}{info.held}", highlight=False, markup=False, soft_wrap=True)
        if not info.runs:
            console.print("no fires yet", highlight=False)
            return
        table = Table(box=None, header_style="bold")
        for col in ("AT", "OUTCOME", "JOB", "MESSAGE", ""):
            table.add_column(col, overflow="fold")
        for run in info.runs:
            started = run.job_id or run.run_id or "-"
            table.add_row(_local(run.at), run.outcome, f"{started} (deleted)" if run.gone else started,
                          Text(run.message or ""), "manual" if run.manual else "")
        console.print(table)


@app.command()
def pause(schedule: str) -> None:
    """No fire until resumed; the jobs it started go on."""
    with handled():
        info = client().schedules.pause(schedule)
        console.print(f"schedule {info.name} ({info.id}) paused", highlight=False, soft_wrap=True)


@app.command()
def resume(schedule: str) -> None:
    """Fire from now on; the fires due while it was paused are not made up."""
    with handled():
        info = client().schedules.resume(schedule)
        console.print(f"schedule {info.name} ({info.id}) resumed, {_next(info)}", highlight=False, soft_wrap=True)


@app.command()
def trigger(schedule: str, output: OutputOpt = Output.table) -> None:
    """Fire now, out of the cron (paused or not), as its concurrency policy allows; exits 1 when no job
    was started (skipped: the last run still runs; failed: the submit was refused)."""
    with handled():
        run = client().schedules.trigger(schedule)
        if output == Output.json:
            write(run.model_dump_json(indent=2) + "\n")
        else:
            console.print(f"schedule {schedule}: {_outcome(run)}", highlight=False, markup=False,
                          soft_wrap=True)
        if run.job_id is None and run.run_id is None:
            raise typer.Exit(1)


@app.command("rm")
def rm(schedule: str) -> None:
    """Delete the schedule and its record of fires; the jobs it started are left as they are."""
    with handled():
        client().schedules.delete(schedule)
        console.print(f"schedule {schedule} deleted", highlight=False, soft_wrap=True)


def _where(path: Path, wanted: ScheduleSpec, cron: str | None) -> tuple[Path, str | None]:
    """Where the server's refusal is placed: in the pipeline file a schedule runs, or in ``path``, where a schedule
    file has its job under ``job:`` and a job file given with --cron at the top (``runspec.placed_at``)."""
    if wanted.pipeline is not None:
        return (path if cron is not None else path.parent / str(wanted.pipeline)), None
    return path, "job" if cron is None else None


def _local(ts: float, short: bool = False) -> str:
    """``ts`` in this machine's time zone (``short``: month, day and time, for a table)."""
    return datetime.fromtimestamp(ts).astimezone().strftime("%m-%d %H:%M:%S" if short else "%Y-%m-%d %H:%M:%S %Z")


def _when(info: ScheduleInfo) -> str:
    """The cron in words, on its clock: ``At 03:00 every day (Europe/Paris)``."""
    return f"{info.explain or info.spec.cron} ({info.spec.timezone})"


def _next(info: ScheduleInfo, bare: bool = False, short: bool = False) -> str:
    if info.suspended:
        return "paused"
    if info.next_at is None:
        return "never again"
    return _local(info.next_at, short) if bare else f"next at {_local(info.next_at)}"


def _outcome(run: ScheduleRun) -> str:
    said = (f"{run.outcome} job {run.job_id}" if run.job_id else
            f"{run.outcome} pipeline run {run.run_id}" if run.run_id else run.outcome)
    return f"{said} ({run.message})" if run.message else said
