"""`trainyard service …` and `trainyard serve`: long-running jobs with a port, reached at /serve/NAME."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from trainyard.cli.common import Output, client, console, handled, write
from trainyard.cli.toplevel import SuggestingGroup, in_range

if TYPE_CHECKING:  # the CLI loads models and rich's tables only in the command that needs them
    from trainyard.spec.service import ServiceInfo

app = typer.Typer(no_args_is_help=True, cls=SuggestingGroup,
                  help="Services: long-running jobs with a port, reached through the server at /serve/NAME.")
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]
# spec.service.Autoscale's bounds (the spec is not imported to read them: tests/unit/test_cli_numbers.py keeps them
# equal), checked before a request as the other number flags are
TARGET_CONCURRENCY = {"gt": 0, "le": 100_000}


def _print(info: ServiceInfo, output: Output, server: str) -> None:
    if output == Output.json:
        write(info.model_dump_json(indent=2) + "\n")
        return
    console.print(f"service [bold]{info.name}[/bold] ({info.id}) version {info.version}: {info.reason}\n"
                  f"  {server}{info.url}", highlight=False)


@app.command()
def apply(file: Annotated[Path, typer.Argument(help="a service spec: a job spec with a service: block")],
          output: OutputOpt = Output.table) -> None:
    """Create the service, or roll out the changed spec replica by replica."""
    from trainyard.cli.runspec import placed_at
    from trainyard.sdk.services import load_service

    with handled():
        spec = load_service(file)  # read and checked before any server is asked (or started)
        c = client()
        with placed_at(file):
            info = c.services.apply(spec, base_dir=file.resolve().parent)
        _print(info, output, c.server)


@app.command("ls")
def ls(all: Annotated[bool, typer.Option("--all", "-a", help="with stopped ones")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="at most this many, newest first")] = 50,
    after: Annotated[Optional[str], typer.Option("--after", help="continue a listing where it stopped")] = None,
       output: OutputOpt = Output.table) -> None:
    """Services with their replicas and traffic, newest first; many come in pages (--after, --limit)."""
    from trainyard.cli.listing import paged_list, said_empty
    from trainyard.cli.safe_text import Table

    with handled():
        c = client()
        infos = paged_list(lambda **k: c.services.page(include_ended=all, **k), limit=limit, after=after,
                           raise_hint="raise --limit")
        if output == Output.json:
            write(json.dumps([s.model_dump(mode="json") for s in infos], indent=2) + "\n")
            return
        if said_empty(infos, "services", {"--after": after}, hint="" if all else "--all shows stopped ones too"):
            return
        table = Table(box=None, header_style="bold")
        for col in ("NAME", "ID", "STATUS", "VERSION", "READY", "URL", "REASON"):
            table.add_column(col, no_wrap=col in ("NAME", "ID"))
        for s in infos:
            table.add_row(s.name, s.id, s.status.value, str(s.version), f"{s.ready}/{s.wanted}", s.url, s.reason or "")
        console.print(table)


@app.command()
def show(service: str, output: OutputOpt = Output.table) -> None:
    """One service: its replicas (job, version, address, ready) and its traffic."""
    from trainyard.cli.safe_text import Table

    with handled():
        c = client()
        s = c.services.get(service)
        if output == Output.json:
            write(s.model_dump_json(indent=2) + "\n")
            return
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_row("service", f"{s.name}  ({s.id}, queue {s.queue}, owner {s.owner or '-'})")
        grid.add_row("status", f"{s.status.value}: {s.reason or ''}")
        grid.add_row("url", c.server + s.url)
        auto = s.spec.service.autoscale
        grid.add_row("replicas", f"{s.ready} ready of {s.wanted} wanted, {s.restarts} restarts" +
                     (f" (autoscale {auto.min}..{auto.max}, {auto.target_concurrency:g} in flight each)" if auto else ""))
        t = s.traffic
        latency = f"p50 {t.p50_ms:.1f} ms, p95 {t.p95_ms:.1f} ms" if t.p50_ms is not None else "-"
        grid.add_row("traffic", f"{t.requests} requests, {t.errors} errors, {t.in_flight} in flight; {latency}")
        console.print(grid)
        if s.replicas:
            table = Table(box=None, header_style="bold")
            for col in ("#", "JOB", "VERSION", "STATUS", "READY", "ADDRESS", "NODE"):
                table.add_column(col)
            for i, r in enumerate(s.replicas):
                ready = "draining" if r.draining else "yes" if r.ready else "no"
                table.add_row(str(i), r.job_id, str(r.version), r.status, ready, r.address or "-", r.node or "-")
            console.print(table)


@app.command()
def logs(service: str,
         replica: Annotated[str, typer.Argument(help="replica index (as in `service show`) or its job id")] = "0",
         follow: Annotated[bool, typer.Option("--follow", "-f")] = False) -> None:
    """A replica's log (its job's)."""
    with handled():
        for chunk in client().services.logs(service, replica, follow=follow):
            write(chunk.data)


@app.command()
def scale(service: str,
          replicas: Annotated[Optional[int], typer.Argument(help="a fixed number of replicas")] = None,
          minimum: Annotated[Optional[int], typer.Option("--min", help="autoscale: at least this many")] = None,
          maximum: Annotated[Optional[int], typer.Option("--max", help="autoscale: at most this many")] = None,
          target_concurrency: Annotated[Optional[float], typer.Option(
              "--target-concurrency", callback=in_range(**TARGET_CONCURRENCY),
              help="autoscale: requests in flight one replica is meant to hold")] = None,
          scale_down_after: Annotated[Optional[str], typer.Option(
              "--scale-down-after", help="autoscale: idle time before replicas go down to --min, e.g. 90s, 5m")] = None,
          output: OutputOpt = Output.table) -> None:
    """A fixed number of replicas (autoscaling off), or autoscaling settings; those not given stay."""
    with handled():
        c = client()
        _print(c.services.scale(service, replicas, minimum=minimum, maximum=maximum,
                                target_concurrency=target_concurrency, scale_down_after=scale_down_after),
               output, c.server)


@app.command()
def delete(service: str) -> None:
    """Stop the service: its replicas are cancelled."""
    with handled():
        s = client().services.delete(service)
        console.print(f"service {s.name} ({s.id}) {s.status.value}", highlight=False)


def serve(
    source: Annotated[str, typer.Argument(
        help="a job id (its outputs), a sweep id (its best trial's), an artifact id or digest, or a URL")],
    name: Annotated[str, typer.Option("--name", help="the service's name: /serve/NAME")],
    replicas: Annotated[Optional[int], typer.Option("--replicas", help="a fixed number of replicas")] = None,
    minimum: Annotated[Optional[int], typer.Option("--min", help="autoscale: at least this many (0: scale to zero)")] = None,
    maximum: Annotated[Optional[int], typer.Option("--max", help="autoscale: at most this many")] = None,
    target_concurrency: Annotated[Optional[float], typer.Option(
        "--target-concurrency", callback=in_range(**TARGET_CONCURRENCY),
        help="autoscale: requests in flight one replica is meant to hold (default 8)")] = None,
    scale_down_after: Annotated[Optional[str], typer.Option(
        "--scale-down-after", help="autoscale: idle time before replicas go down to --min, e.g. 90s, 5m (default 5m)")] = None,
    model_format: Annotated[str, typer.Option(
        "--format", help="auto, sklearn, xgboost, torch-export, torchscript, torch-state-dict")] = "auto",
    cpu: Annotated[str, typer.Option(help="cores per replica")] = "1",
    memory: Annotated[Optional[str], typer.Option(help="memory per replica, e.g. 2Gi")] = None,
    gpu: Annotated[int, typer.Option(help="GPUs per replica")] = 0,
    queue: Annotated[str, typer.Option(help="the queue its replicas wait in")] = "default",
    module: Annotated[Optional[str], typer.Option(
        "--module", help="pkg.mod:Factory that builds a PyTorch model for a state dict, from this folder's code")] = None,
    output: OutputOpt = Output.table,
) -> None:
    """Serve a trained model with the built-in model server (Open Inference Protocol v2) at /serve/NAME.

    Any of --min, --max, --target-concurrency, --scale-down-after turns autoscaling on (--min 0 by default,
    --max 1 or --min); --replicas is a fixed number instead."""
    with handled():
        from trainyard.cli.sweeps import SWEEP_OR_SERVICE, best_trial_job
        from trainyard.sdk.services import serve_spec

        def spec_of(model: str):  # noqa: ANN202
            return serve_spec(model, name, replicas=replicas, minimum=minimum, maximum=maximum,
                              target_concurrency=target_concurrency, scale_down_after=scale_down_after,
                              model_format=model_format, cpu=cpu, memory=memory, gpu=gpu, queue=queue,
                              module=module)

        spec = spec_of(source)  # checked before any server is asked (or started)
        c = client()
        if source.startswith(SWEEP_OR_SERVICE):  # a sweep's id: its best trial's job (a service's is no model)
            spec = spec_of(best_trial_job(c, source, "serve"))
        info = c.services.apply(spec)
        _print(info, output, c.server)
        if output != Output.json:  # how to call it, the token kept off the screen
            console.print(f"  curl -H \"Authorization: Bearer $(trainyard token print)\" "
                          f"{c.server}{info.url}v2/models/{info.name}", highlight=False, soft_wrap=True)
