"""`trainyard sweep …`: hyperparameter searches whose trials are jobs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from trainyard.cli.common import WAIT_MAX, Output, client, console, err_console, handled, write
from trainyard.cli.toplevel import SuggestingGroup

if TYPE_CHECKING:
    from trainyard.spec.sweep import SweepInfo

app = typer.Typer(no_args_is_help=True, cls=SuggestingGroup,
                  help="Hyperparameter sweeps: trials run as jobs, bad ones stop early.")
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]


@app.command()
def run(spec: Annotated[Path, typer.Argument(help="the sweep's YAML (see `trainyard sweep run --help`)")],
        wait: Annotated[bool, typer.Option("--wait", "-w", help="follow it to its end, then show its trials")] = False,
        timeout: Annotated[Optional[float], typer.Option(
            min=0, max=WAIT_MAX, help="with --wait: give up after this many seconds (exit 124)")] = None,
        output: OutputOpt = Output.table) -> None:
    """Start a sweep: a job spec under `job:`, `parameters` to search ({values: [...]} or {min, max, log}),
    the `metric` each trial logs and its goal, `trials`, `parallel`, `method` (tpe, random, grid) and
    `early_stopping` ({type: median} or {type: hyperband})."""
    from trainyard.cli.runspec import placed_at
    from trainyard.sdk.sweeps import load_sweep

    with handled():
        sweep = load_sweep(spec)  # read and checked before any server is asked (or started)
        c = client()
        with placed_at(spec, under="job"):  # the trial job's fields are under job:
            info = c.sweep(sweep, base_dir=spec.resolve().parent)
        if not wait:
            if output == Output.json:
                write(info.model_dump_json(indent=2) + "\n")
            else:
                console.print(f"sweep [bold]{info.id}[/bold] ({info.name}) started: {info.spec.max_trials} trials, "
                              f"{info.spec.parallel} at once. `trainyard sweep show {info.id}` for its trials.",
                              highlight=False)
            return
        info = _follow(c, info.id, timeout, quiet=output == Output.json)
        _show(info, output)
        raise typer.Exit(0 if info.status.value == "succeeded" else 1)


def _follow(c, sweep_id: str, timeout: float | None, quiet: bool) -> SweepInfo:  # noqa: ANN001
    """Poll until the sweep ends, with a live line of its progress on a terminal."""
    from trainyard.errors import WaitTimeout

    deadline = None if timeout is None else time.monotonic() + timeout
    status = None if quiet else console.status(f"sweep {sweep_id}: starting")
    if status is not None:
        status.start()
    try:
        while True:
            info = c.sweeps.get(sweep_id)
            if info.status.is_terminal():
                return info
            if status is not None:
                status.update(f"sweep {sweep_id}: {info.reason or info.status.value}")
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"sweep {sweep_id} still {info.status.value} after {timeout:g}s: {info.reason}")
            time.sleep(1.0)
    finally:
        if status is not None:
            status.stop()


@app.command()
def wait(sweep: str,
         timeout: Annotated[Optional[float], typer.Option(min=0, max=WAIT_MAX,
                                                          help="give up after this many seconds (exit 124)")] = None,
         output: OutputOpt = Output.table) -> None:
    """Wait until a sweep ends (a live line of its progress on a terminal), then show its trials; exit 0 only if
    it succeeded."""
    with handled():
        info = _follow(client(), sweep, timeout, quiet=output == Output.json)
        _show(info, output)
        raise typer.Exit(0 if info.status.value == "succeeded" else 1)


@app.command("ls")
def ls(running: Annotated[bool, typer.Option("--running", help="only those still running")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="at most this many, newest first")] = 50,
    all_: Annotated[bool, typer.Option("--all", "-a", help="every one, page after page")] = False,
    after: Annotated[Optional[str], typer.Option("--after", help="continue a listing where it stopped")] = None,
       output: OutputOpt = Output.table) -> None:
    """Sweeps, newest first, with their best trial; many come in pages (--after, --all)."""
    from trainyard.cli.listing import paged_list, said_empty
    from trainyard.cli.safe_text import Table

    with handled():
        c = client()
        infos = paged_list(lambda **k: c.sweeps.page(include_ended=not running, **k), limit=None if all_ else limit,
                           after=after)
        if output == Output.json:
            write(json.dumps([s.model_dump(mode="json") for s in infos], indent=2) + "\n")
            return
        if said_empty(infos, "sweeps", {"--running": running, "--after": after}):
            return
        table = Table(box=None, header_style="bold")
        for col in ("ID", "NAME", "STATUS", "METRIC", "BEST", "TRIALS", "REASON"):
            table.add_column(col, no_wrap=col == "ID")
        for s in infos:
            best = f"{s.best.value:.6g} (trial {s.best.number})" if s.best and s.best.value is not None else "-"
            ended = sum(n for state, n in s.counts.items() if state.is_terminal())
            table.add_row(s.id, s.name, s.status.value, f"{s.spec.metric.name} ({s.spec.metric.goal})", best,
                          f"{ended}/{s.spec.max_trials}", s.reason or "")
        console.print(table)


@app.command()
def show(sweep: str, output: OutputOpt = Output.table) -> None:
    """One sweep: its status and every trial, best first."""
    with handled():
        _show(client().sweeps.get(sweep), output)


@app.command()
def cancel(sweep: str) -> None:
    """Stop the sweep: its running trials are cancelled; the best so far stays."""
    with handled():
        s = client().sweeps.cancel(sweep)
        console.print(f"sweep {s.id} {s.status.value}", highlight=False)


@app.command()
def rm(sweep: str) -> None:
    """Delete an ended sweep with its trials' jobs (their logs, metrics, outputs); their usage stays counted."""
    with handled():
        client().sweeps.delete(sweep)
        console.print(f"deleted sweep {sweep}", highlight=False)


def _show(info: SweepInfo, output: Output) -> None:
    from trainyard.cli.safe_text import Table

    if output == Output.json:
        write(info.model_dump_json(indent=2) + "\n")
        return
    m = info.spec.metric
    console.print(f"sweep [bold]{info.id}[/bold] ({info.name}) {info.status.value}: {info.reason or ''}",
                  highlight=False)
    if info.best is not None:
        console.print(f"best: trial {info.best.number} (job {info.best.job_id}), {m.name} {info.best.value:.6g}, "
                      f"params {json.dumps(info.best.params)}", highlight=False, markup=False)
    table = Table(box=None, header_style="bold")
    names = list(info.spec.searched())
    for col in ("TRIAL", "JOB", "STATE", m.name.upper(), "STEP", *(n.upper() for n in names), "REASON"):
        table.add_column(col, overflow="fold")
    sign = -1.0 if m.goal == "maximize" else 1.0
    # best first: complete by value, then running, then the rest by number
    order = sorted(info.trials, key=lambda t: (t.state.value != "complete", sign * (t.value or 0.0)
                                               if t.state.value == "complete" else t.number))
    for t in order:
        table.add_row(str(t.number), t.job_id, t.state.value, "-" if t.value is None else f"{t.value:.6g}",
                      "-" if t.step is None else str(t.step), *(_param(t.params.get(n)) for n in names),
                      t.reason or "")
    console.print(table)


def _param(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# the ids `serve` and `download` look up as a sweep's (its best trial's job) or refuse as a service's: a service's
# id was s-… too until services took svc-, and those are kept, so an s-… no sweep has may be an old service's
SWEEP_OR_SERVICE = ("s-", "svc-")


def best_trial_job(c, sweep_id: str, verb: str) -> str:  # noqa: ANN001
    """The job of a sweep's best finished trial, said on stderr: what `serve` and `download` (``verb``) take for a
    sweep. A service's id is refused as one, where "no such sweep" would leave the user guessing."""
    from trainyard.errors import NotFound, TrainyardError

    sweep = missing = None
    if not sweep_id.startswith("svc-"):  # never a sweep's
        try:
            sweep = c.sweeps.get(sweep_id)
        except NotFound as e:
            missing = e
    if sweep is None:
        try:
            service = c.services.get(sweep_id)
        except NotFound as e:
            raise missing or e from None
        raise TrainyardError(f"{sweep_id} is service {service.name}'s id, not a sweep's: a service has no outputs to "
                             f"{verb}; give a job's id or a sweep's")
    best = sweep.best
    if best is None or best.state.value != "complete":
        raise TrainyardError(f"sweep {sweep.id} ({sweep.name}) has no finished trial yet: "
                             f"`trainyard sweep wait {sweep.id}`")
    err_console.print(f"sweep {sweep.id}: its best trial {best.number} (job {best.job_id}, "
                      f"{sweep.spec.metric.name} {best.value:g})", highlight=False)
    return best.job_id
