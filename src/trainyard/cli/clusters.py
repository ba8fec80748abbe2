"""`trainyard cluster …`: on-demand Dask clusters run as trainyard jobs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from trainyard.cli.common import Output, as_flags, client, console, handled, write
from trainyard.cli.toplevel import SuggestingGroup
from trainyard.errors import InvalidSpec

if TYPE_CHECKING:
    from trainyard.spec.cluster import ClusterInfo

app = typer.Typer(no_args_is_help=True, cls=SuggestingGroup, help="On-demand Dask clusters: a scheduler and workers run as jobs.")
create_app = typer.Typer(no_args_is_help=True, cls=SuggestingGroup, help="Create a cluster.")
app.add_typer(create_app, name="create")
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]
# the fields of a cluster create's spec whose flag is not --field-name; a bad one is said as its flag
CLUSTER_FLAGS = {"pip": "--env", "secrets": "--secret", "adapt_min": "--min", "adapt_max": "--max",
                 **{f: "--" + f.replace("_", "-") for f in ("workers", "worker_cpu", "worker_memory", "worker_gpu",
                                                             "worker_gpu_type", "scheduler_memory", "idle_timeout")}}


def _clusters():  # noqa: ANN202
    from trainyard.sdk.clusters import Clusters

    return Clusters(client().http)


def pip_list(values: list[str]) -> list[str]:
    """``--env`` values: a requirements file (its lines) or package requirements."""
    out: list[str] = []
    for v in values:
        path = Path(v)
        if path.is_file():
            lines = [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines()]
            out += [ln for ln in lines if ln]
        elif v.endswith(".txt"):
            raise InvalidSpec.flag("--env", f"no such requirements file: {v}")
        else:
            out += v.replace(",", " ").split()
    return out


@create_app.command("dask")
def create_dask(
    workers: Annotated[int, typer.Option(help="workers to start with")] = 2,
    worker_cpu: Annotated[str, typer.Option(help="cores per worker, e.g. 1 or 500m")] = "1",
    worker_memory: Annotated[Optional[str], typer.Option(help="memory per worker, e.g. 2Gi")] = None,
    worker_gpu: Annotated[int, typer.Option(help="GPUs per worker")] = 0,
    scheduler_memory: Annotated[Optional[str], typer.Option(
        help="memory of the scheduler, e.g. 1Gi (a queue with a memory quota needs it)")] = None,
    worker_gpu_type: Annotated[Optional[str], typer.Option(help="GPU type, e.g. A100")] = None,
    env: Annotated[Optional[list[str]], typer.Option(help="requirements.txt, or packages (repeatable)")] = None,
    queue: Annotated[str, typer.Option(help="the queue its jobs wait in")] = "default",
    idle_timeout: Annotated[str, typer.Option(help="shut down after this long with no client and no task; 0: never")] = "30m",
    name: Annotated[str, typer.Option(help="a name to find it by")] = "dask",
    minimum: Annotated[Optional[int], typer.Option("--min", help="start adaptive, at least this many workers")] = None,
    maximum: Annotated[Optional[int], typer.Option("--max", help="start adaptive, at most this many workers")] = None,
    secret: Annotated[Optional[list[str]], typer.Option(
        "--secret", help="a team secret in each worker's environment: NAME, or VARIABLE=NAME")] = None,
    output: OutputOpt = Output.table,
) -> None:
    """Start a Dask scheduler and workers as jobs in QUEUE."""
    with handled():
        from trainyard.cli.runspec import secret_flags
        from trainyard.sdk.clusters import cluster_spec

        pip, secrets = pip_list(env or []), secret_flags(secret or [])
        try:
            spec = cluster_spec(workers=workers, worker_cpu=worker_cpu, worker_memory=worker_memory,
                                worker_gpu=worker_gpu, worker_gpu_type=worker_gpu_type, pip=pip,
                                scheduler_memory=scheduler_memory, queue=queue, idle_timeout=idle_timeout,
                                name=name, adapt_min=minimum, adapt_max=maximum, secrets=secrets)
        except InvalidSpec as e:
            raise as_flags(e, CLUSTER_FLAGS) from None
        info = _clusters().create(spec)
        if output == Output.json:
            write(info.model_dump_json(indent=2) + "\n")
            return
        console.print(f"cluster [bold]{info.id}[/bold] ({info.name}) {info.status.value}: {info.reason}",
                      highlight=False)


@app.command("ls")
def ls(all: Annotated[bool, typer.Option("--all", "-a", help="with stopped and failed ones")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="at most this many, newest first")] = 50,
    after: Annotated[Optional[str], typer.Option("--after", help="continue a listing where it stopped")] = None,
       output: OutputOpt = Output.table) -> None:
    """Clusters with their status and workers, newest first; many come in pages (--after, --limit)."""
    from trainyard.cli.listing import paged_list, said_empty
    from trainyard.cli.safe_text import Table

    with handled():
        clusters = _clusters()
        infos = paged_list(lambda **k: clusters.page(include_ended=all, **k), limit=limit, after=after,
                           raise_hint="raise --limit")
        if output == Output.json:
            write(json.dumps([c.model_dump(mode="json") for c in infos], indent=2) + "\n")
            return
        if said_empty(infos, "clusters", {"--after": after},
                      hint="" if all else "--all shows stopped and failed ones too"):
            return
        table = Table(box=None, header_style="bold")
        for col in ("ID", "NAME", "STATUS", "QUEUE", "WORKERS", "REASON"):  # workers: running/wanted
            table.add_column(col, no_wrap=col == "ID")
        for c in infos:
            table.add_row(c.id, c.name, c.status.value, c.queue, _workers_text(c), c.reason or "")
        console.print(table)


@app.command()
def show(cluster: str, output: OutputOpt = Output.table) -> None:
    """One cluster: scheduler address, dashboard, and each worker with where it runs."""
    from trainyard.cli.safe_text import Table
    from trainyard.spec.units import format_memory

    with handled():
        clusters = _clusters()
        c = clusters.get(cluster)
        if output == Output.json:
            write(c.model_dump_json(indent=2) + "\n")
            return
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_row("cluster", f"{c.id}  ({c.name}, queue {c.queue})")
        grid.add_row("status", f"{c.status.value}: {c.reason or ''}")
        grid.add_row("scheduler", f"{c.address or '-'}  (job {c.scheduler_job}, node {c.scheduler_node or '-'})")
        grid.add_row("dashboard", f"{clusters.http.server}{c.dashboard}  (or on a port of this machine: trainyard "
                     f"cluster dashboard {c.id})" if c.dashboard and c.status.value == "running" else "-")
        grid.add_row("workers", _workers_text(c) + " running/wanted")
        s = c.spec
        grid.add_row("each worker", f"{s.worker_cpu:g} cpu, {format_memory(s.worker_memory)}"
                     + (f", {s.worker_gpu} GPU" if s.worker_gpu else ""))
        if c.owner_job:
            grid.add_row("ends with", f"job {c.owner_job}")
        console.print(grid)
        if c.worker_jobs:
            table = Table(box=None, header_style="bold")
            for col in ("JOB", "STATUS", "NODE", "DASK ADDRESS", "REASON"):
                table.add_column(col)
            for w in c.worker_jobs:
                table.add_row(w.job_id, w.status, w.node or "-", w.address or "-", w.reason or "")
            console.print(table)


@app.command()
def dashboard(
    cluster: str,
    port: Annotated[int, typer.Option(help="the port on this machine (0: any free one)")] = 0,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="print the address instead of opening a browser")]
    = False,
) -> None:
    """The cluster's Dask dashboard on a port of this machine, live plots included, until Ctrl-C.

    Its requests go on to the server with this CLI's token, which the pages never see. The port listens on
    loopback and answers only a browser that came with the key in the printed address (another account on this
    machine can reach the port). On a server with users this is the way to the live plots: there the server
    sandboxes the dashboard's pages, which are its owner's job's."""
    from trainyard.cli.ui import leading_to
    from trainyard.sdk.dashboard_port import forward_for

    with handled():
        clusters = _clusters()
        forward = forward_for(clusters.http, clusters.get(cluster), port)
        console.print(f"the Dask dashboard of {cluster}: {forward.url}  (Ctrl-C stops it)", soft_wrap=True,
                      markup=False, highlight=False)
        if not no_browser:
            import webbrowser

            webbrowser.open(leading_to(forward.url).as_uri())  # not the key on a command line (/proc/PID/cmdline)
        try:
            forward.serve()
        except KeyboardInterrupt:  # uvicorn stops, then passes the Ctrl-C on: what was asked for
            pass


@app.command()
def scale(cluster: str, workers: Annotated[int, typer.Argument(help="workers wanted")]) -> None:
    """A fixed number of workers (turns adaptive scaling off)."""
    with handled():
        c = _clusters().scale(cluster, workers)
        console.print(f"cluster {c.id}: {workers} workers wanted", highlight=False)


@app.command()
def adapt(cluster: str, minimum: Annotated[int, typer.Option("--min")] = 1,
          maximum: Annotated[int, typer.Option("--max")] = 10) -> None:
    """Let Dask's adaptive target decide the workers, within --min and --max."""
    with handled():
        c = _clusters().adapt(cluster, minimum, maximum)
        console.print(f"cluster {c.id}: adaptive, {minimum} to {maximum} workers", highlight=False)


@app.command()
def delete(cluster: str) -> None:
    """Stop the cluster: its workers and scheduler are cancelled."""
    with handled():
        c = _clusters().delete(cluster)
        console.print(f"cluster {c.id} {c.status.value}", highlight=False)


def _workers_text(c: ClusterInfo) -> str:
    """Running of wanted, as a list's column reads it ("1/2"), with an adaptive cluster's bounds."""
    text = f"{c.workers_running}/{c.workers}"
    return text + (f" (adaptive {c.adapt_min}..{c.adapt_max})" if c.adapt_max is not None else "")
