"""Pipeline and artifact commands: run, show, logs, retry, cancel, ls; artifact show. Through the SDK only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Group

from trainyard.cli.common import Output, client, console, delete_each, err_console, handled, ids_of, write
from trainyard.cli.job_ref import run_id_of
from trainyard.cli.render import ago, duration, status_text
from trainyard.cli.toplevel import SuggestingGroup

if TYPE_CHECKING:
    from rich.text import Text
    from rich.tree import Tree

app = typer.Typer(no_args_is_help=True, cls=SuggestingGroup, help="Pipelines: steps that pass artifacts, each run as a job.")
artifact_app = typer.Typer(no_args_is_help=True, cls=SuggestingGroup, help="Step artifacts, by content hash, with their lineage.")

ParamOpt = Annotated[Optional[list[str]], typer.Option("--param", "-p", help="override a param: key=value")]
RunArg = Annotated[str, typer.Argument(help="pipeline run id, or name (the newest run of that name)")]
OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table or json")]
# --wait as `trainyard run --wait` and `sweep run --wait` say it: a run's progress is its steps, shown as they go
FollowOpt = Annotated[bool, typer.Option("--follow", "-f", "--wait", "-w", help="show progress until the run ends")]

STEP_STYLE = {"waiting": "dim", "cached": "green", "skipped": "dim"}


@app.command("run")
def run(
    spec: Annotated[Path, typer.Argument(help="pipeline file (YAML)", exists=True, dir_okay=False)],
    param: ParamOpt = None,
    follow: FollowOpt = False,
) -> None:
    """Start a run. Prints its id and returns at once, or with --follow (--wait) shows progress until it ends;
    exit 0 only on success."""
    from trainyard.cli.runspec import placed_at
    from trainyard.spec.loader import parse_param_overrides

    with handled():
        c = client()
        body = c.pipelines.prepare(spec, parse_param_overrides(param or []))
        with placed_at(spec):
            handle = c.pipelines.start(body)
        for w in handle.info.warnings:
            err_console.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
        if not follow:
            write(handle.id + "\n")
            return
        err_console.print(f"started [bold]{handle.id}[/bold] ({handle.info.name})", highlight=False)
        raise typer.Exit(_follow(handle))


def _follow(handle) -> int:  # noqa: ANN001
    from rich.live import Live

    info = handle.info
    if console.is_terminal:
        with Live(run_tree(info), console=console, refresh_per_second=4) as live:
            for info in handle.watch():
                live.update(run_tree(info))
    else:  # a log, not a screen: one line per step change
        seen: dict[str, str] = {}
        for info in handle.watch():
            for s in info.steps:
                if seen.get(s.name) != s.status:
                    seen[s.name] = s.status
                    write(f"{s.name}: {s.status}" + (f" ({s.reason})" if s.reason and s.status != "succeeded" else "")
                          + "\n")
        console.print(run_tree(info))
    err_console.print(f"{info.id} ", status_text(info.status.value), f" {info.reason or ''}".rstrip(), sep="",
                      highlight=False)
    if failed := next((s for s in info.steps if s.status == "failed" and s.job_id), None):
        err_console.print(f"its log: trainyard pipeline logs {info.id} {failed.name}", highlight=False)
    return 0 if info.status.value == "succeeded" else 1


@app.command("show")
def show(
    run_id: RunArg,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="keep the tree up to date until the run ends")] = False,
    output: OutputOpt = Output.table,
) -> None:
    """The run's steps as a tree with their state (a foreach step's items under it)."""
    from rich.live import Live

    with handled():
        c = client()
        run_id = run_id_of(c.pipelines, run_id)
        if output == Output.json:
            write(c.pipelines.get(run_id).model_dump_json(indent=2) + "\n")
            return
        if watch:
            handle = c.pipelines.run_handle(run_id)
            with Live(run_tree(handle.info), console=console, refresh_per_second=4) as live:
                for info in handle.watch():
                    live.update(run_tree(info))
            return
        console.print(run_tree(c.pipelines.get(run_id)))


@app.command("retry")
def retry(run_id: RunArg, follow: FollowOpt = False) -> None:
    """Run the failed steps and what follows them again, reusing the steps that succeeded."""
    with handled():
        c = client()
        run_id = run_id_of(c.pipelines, run_id)
        info = c.pipelines.retry(run_id)
        again = [s.name for s in info.steps if s.state.value in ("waiting", "submitted")]
        err_console.print(f"{run_id}: running again: {', '.join(again) or 'nothing'}", highlight=False)
        if follow:
            raise typer.Exit(_follow(c.pipelines.run_handle(run_id)))


@app.command("wait")
def wait(run_id: RunArg) -> None:
    """Wait until a run ends, showing its steps as they go (a live tree on a terminal, a line per change
    otherwise); exit 0 only if it succeeded."""
    with handled():
        c = client()
        raise typer.Exit(_follow(c.pipelines.run_handle(run_id_of(c.pipelines, run_id))))


@app.command("cancel")
def cancel(run_id: RunArg) -> None:
    """Cancel a run: every running step's job is cancelled and nothing more starts. Its status after is printed;
    a run that had already ended is said so, and left as it is (exit 0, as `trainyard cancel` of an ended job)."""
    with handled():
        c = client()
        run_id = run_id_of(c.pipelines, run_id)
        before = c.pipelines.get(run_id)
        info = c.pipelines.cancel(run_id)
        console.print(run_id, status_text(info.status.value))
        # the same end as before the request: none of ours (a run of pending steps ends at once when cancelled)
        if before.status.is_terminal() and info.status.is_terminal() and info.ended_at == before.ended_at:
            err_console.print(f"run {run_id} had already ended ({info.status.value}): nothing to cancel",
                              highlight=False)


@app.command("logs")
def logs(
    run_id: RunArg,
    step: Annotated[str, typer.Argument(help="the step as `pipeline show` names it (a foreach item: train-0)")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="wait for the step's job, then stream its log "
                                                                 "until it ends")] = False,
    tail: Annotated[Optional[int], typer.Option("--tail", "-n", min=0, help="only the last N lines")] = None,
) -> None:
    """A step's log: its job's (a cached step's, the job whose outputs it reuses), as `trainyard logs JOB`."""
    from trainyard.cli.jobs import logs as job_logs

    with handled():
        c = client()
        run_id = run_id_of(c.pipelines, run_id)
        info = c.pipelines.get(run_id)
        s = step_named(info, step)
        if follow and not (s.job_id or s.cached_from) and not info.status.is_terminal():
            for info in c.pipelines.run_handle(run_id).watch():  # until it is submitted (or the run ends)
                if (s := info.step(s.name)).job_id or s.cached_from:
                    break
        job_id = s.job_id or s.cached_from
        if job_id is None:
            from trainyard.errors import NotFound

            why = s.reason or ("it has not started yet (-f waits for it)" if s.status == "waiting" else "")
            raise NotFound(f"step {s.name} of {run_id} ran no job: {s.status}" + (f", {why}" if why else ""))
        if not s.job_id:
            err_console.print(f"{s.name} is cached: the log of {job_id}, whose outputs it reuses", highlight=False)
    job_logs(job_id, follow=follow, attempt=None, replica=None, tail=tail)


def step_named(info, name: str):  # noqa: ANN001, ANN201
    """The step (or foreach item) called ``name``; otherwise InvalidSpec on the STEP argument (exit 2) naming every
    step it could have meant: those it begins (a graph component's ``scale`` for ``scale-first``, ``scale-second``),
    then the close ones."""
    import difflib

    from trainyard.errors import InvalidSpec

    names = [s.name for s in info.steps]
    if name in names:
        return info.step(name)
    items = [s.name for s in info.steps if s.step == name]
    if items:
        raise InvalidSpec.flag("STEP", f"step {name} of {info.id} is a foreach: name one of its {len(items)} items "
                                       f"({items[0]}" + (f" … {items[-1]})" if len(items) > 1 else ")"))
    steps = list(dict.fromkeys(s.name if s.index is None else s.step for s in info.steps))
    # a foreach step stands for its items: `t` names `train`, not each of its hundred items
    meant = [n for n in steps if n.startswith(name)]
    meant += [s.name for s in info.steps if s.index is not None and s.name.startswith(name) and s.step not in meant]
    meant += [n for n in difflib.get_close_matches(name, list(dict.fromkeys(steps + names)), n=3) if n not in meant]
    hint = f"; did you mean {' or '.join([', '.join(meant[:-1]), meant[-1]] if meant[1:] else meant)}?" if meant else ""
    raise InvalidSpec.flag("STEP", f"run {info.id} has no step {name!r}{hint} (its steps: {', '.join(names)})")


@app.command("rm")
def rm(runs: Annotated[Optional[list[str]], typer.Argument(
        help="ids of ended pipeline runs; - reads them from stdin (pipeline ls --ids); none: nothing to do",
        show_default=False)] = None) -> None:
    """Delete ended runs with their steps' jobs (logs, metrics, outputs) and artifacts; their usage stays counted.
    A run whose outputs a later run reuses (cached) is refused until that one is deleted."""
    ids = ids_of(runs, none_is_done=True)
    with handled():
        c = client()
    delete_each(ids, c.pipelines.delete, "pipeline run ")


@app.command("ls")
def ls(
    status: Annotated[Optional[list[str]], typer.Option("--status", "-s", help="only runs in this status")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="only runs of exactly this name")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="at most this many runs")] = 50,
    all_: Annotated[bool, typer.Option("--all", "-a", help="every matching run, page after page")] = False,
    after: Annotated[Optional[str], typer.Option("--after", help="continue a listing where it stopped")] = None,
    before: Annotated[Optional[str], typer.Option("--before", help="started longer ago (30d) or before (2024-05-01)")]
    = None,
    output: OutputOpt = Output.table,
    ids: Annotated[bool, typer.Option("--ids", help="only the ids, one a line: trainyard pipeline rm $(trainyard "
                                      "pipeline ls -s failed --before 30d --ids --all)")] = False,
) -> None:
    """Pipeline runs, newest first; long histories come in pages (--after, --all)."""
    from trainyard.cli.safe_text import Table

    from trainyard.cli.listing import pages, parse_since, said_empty

    with handled():
        until, c = parse_since(before, "--before"), client()

        def fetch(want: int, cursor: str | None) -> tuple[list, str | None]:
            page = c.pipelines.list(status=status, limit=want, cursor=cursor, until=until, name=name)
            return page.items, page.next_cursor

        runs, more = pages(fetch, limit=None if all_ else limit, cursor=after)
        if ids:
            write("".join(f"{r.id}\n" for r in runs))
        elif output == Output.json:
            write(json.dumps([r.model_dump(mode="json") for r in runs], indent=2) + "\n")
        elif not said_empty(runs, "pipeline runs", {"--status": status, "--name": name, "--before": before,
                                                    "--after": after}):
            table = Table(box=None, header_style="bold")
            for col in ("ID", "NAME", "STATUS", "STEPS", "STARTED", "REASON"):
                table.add_column(col, overflow="fold" if col == "REASON" else "ellipsis", no_wrap=col == "ID")
            for r in runs:
                steps = ", ".join(f"{n} {k}" for k, n in sorted(r.counts().items()))
                table.add_row(r.id, r.name, status_text(r.status.value), steps, ago(r.created_at), r.reason or "")
            console.print(table)
        if more:
            err_console.print(f"{len(runs)} shown; more: add --after {more} (or --all)", highlight=False)


@artifact_app.command("show")
def artifact_show(
    key: Annotated[str, typer.Argument(help="artifact id or digest (a unique prefix will do)")],
    output: OutputOpt = Output.table,
) -> None:
    """What produced an artifact: its step, job, inputs (with their digests) and code snapshot."""
    from trainyard.cli.safe_text import Table
    from rich.text import Text

    with handled():
        art = client().pipelines.artifact(key)
        if output == Output.json:
            write(art.model_dump_json(indent=2) + "\n")
            return
        head = Table.grid(padding=(0, 2))
        head.add_column(style="bold")
        head.add_column()
        for label, value in (("artifact", art.id), ("digest", art.digest), ("output", f"{art.step}.{art.output}"),
                             ("run", art.run_id), ("job", f"{art.job_id} (attempt {art.attempt})"),
                             ("size", f"{art.size:,} bytes in {art.files} file(s)"), ("url", art.url),
                             ("code", art.code or "-"), ("created", ago(art.created_at))):
            head.add_row(label, Text(value))
        if art.used_by:
            head.add_row("reused by", Text(", ".join(art.used_by)))
        inputs = Table(title="inputs", box=None, header_style="bold", title_justify="left")
        for col in ("NAME", "FROM", "DIGEST"):
            inputs.add_column(col)
        for name, ref in art.inputs.items():
            origin = (f"{ref.get('step')}.{ref.get('output')}{ref.get('subpath') or ''} "
                      f"({', '.join(ref.get('artifacts') or [])})" if ref.get("kind") == "step"
                      else ref.get("url", "value") if ref.get("kind") == "path" else "value")
            inputs.add_row(name, Text(origin), Text(ref.get("digest", "-")))
        console.print(Group(head, inputs) if art.inputs else head)


@artifact_app.command("download")
def artifact_download(
    key: Annotated[str, typer.Argument(help="artifact id or digest (a unique prefix will do)")],
    to: Annotated[Optional[Path], typer.Option("--to", help="file or folder to write (default ./<output name>)")] = None,
) -> None:
    """Download a step artifact (a file or a folder)."""
    with handled():
        dest = client().pipelines.download(key, to)
        console.print(f"→ {dest}", highlight=False)


def run_tree(info) -> Tree:  # noqa: ANN001
    """The run as a tree: one branch per step, a foreach step's items under it."""
    from rich.text import Text
    from rich.tree import Tree

    title = Text.assemble((info.id, "bold"), f"  {info.name}  ", status_text(info.status.value),
                          f"  {info.reason}" if info.reason else "",
                          f"  (retried {info.retries}×)" if info.retries else "")
    tree = Tree(title)
    groups: dict[str, list] = {}
    for s in info.steps:
        groups.setdefault(s.step, []).append(s)
    for step, items in groups.items():
        needs = sorted({n.rsplit("-", 1)[0] if n not in groups else n for s in items for n in s.needs})
        after = Text(f"  ← {', '.join(needs)}", style="dim") if needs else Text("")
        if len(items) == 1 and items[0].index is None:
            tree.add(Text.assemble(_step_line(items[0]), after))
            continue
        done = sum(s.status in ("succeeded", "cached") for s in items)
        branch = tree.add(Text.assemble((step, "bold"), f"  {done}/{len(items)} done", after))
        for s in items:
            branch.add(_step_line(s))
    return tree


def _step_line(s) -> Text:  # noqa: ANN001
    from rich.text import Text

    style = STEP_STYLE.get(s.status)
    state = Text(s.status, style=style) if style else status_text(s.status)
    parts: list = [(s.name, "bold"), "  ", state]
    if s.job_id or s.cached_from:
        parts.append(f"  {s.job_id or ''}{' from ' + s.cached_from if s.cached_from else ''}")
    if s.started_at:
        parts.append(f"  {duration(s.started_at, s.ended_at)}")
    if s.artifacts:  # ids for `trainyard artifact show`
        parts.append(("  → " + " ".join(f"{k}={v}" for k, v in s.artifacts.items()), "cyan"))
    if s.reason and s.status not in ("succeeded",):
        parts.append((f"  {s.reason}"[:160], "dim"))
    return Text.assemble(*parts)
