"""Job commands: run, ls, show, logs, cancel, download."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainyard.cli.common import Output, client, console, err_console, handled, write
from trainyard.cli.render import job_detail, jobs_table, metrics_table, status_text
from trainyard.cli.resources import resource_table

ParamOpt = Annotated[Optional[list[str]], typer.Option("--param", "-p", help="override a param: key=value")]
JobArg = Annotated[str, typer.Argument(help="job id")]
OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table or json")]


def run(
    spec: Annotated[Path, typer.Argument(help="job spec (YAML), or a notebook (.ipynb) run with papermill",
                                         exists=True, dir_okay=False)],
    param: ParamOpt = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="stream logs until the job ends")] = False,
    gpu: Annotated[Optional[int], typer.Option("--gpu", help="GPUs per replica (overrides the spec)")] = None,
    cpu: Annotated[Optional[str], typer.Option("--cpu", help="cores, e.g. 2 or 500m (overrides the spec)")] = None,
    memory: Annotated[Optional[str], typer.Option("--memory", help="e.g. 4Gi (overrides the spec)")] = None,
) -> None:
    """Submit a job. Prints its id and returns at once, or with --follow streams its logs.

    A notebook runs with papermill: -p values go into its cell tagged `parameters`, and the executed
    notebook (outputs and any error) is in the job's outputs (`trainyard download JOB`)."""
    from trainyard.spec.loader import parse_param_overrides

    with handled():
        c = client()
        params = parse_param_overrides(param or [])
        resources = {k: v for k, v in (("gpu", gpu), ("cpu", cpu), ("memory", memory)) if v is not None}
        args, kwargs = _spec_for(spec, params, resources)
        job = c.submit(*args, **kwargs)
        if not follow:
            write(job.id + "\n")
            return
        err_console.print(f"submitted [bold]{job.id}[/bold] ({job.info.name})", highlight=False)
        raise typer.Exit(_follow(c, job.id))


def _spec_for(path: Path, params: dict, resources: dict) -> tuple:
    """``Client.submit`` arguments for a spec file or a notebook, with resources overridden."""
    from pydantic import ValidationError

    from trainyard.errors import InvalidSpec
    from trainyard.spec.job import JobSpec
    from trainyard.spec.lines import validation_errors
    from trainyard.spec.loader import load_job

    if path.suffix == ".ipynb":
        from trainyard.pipelines.notebook import job_from_notebook

        data = job_from_notebook(path, params)
    elif not resources:
        return (path,), {"params": params}
    else:
        data = load_job(path, params).model_dump()
    data["resources"] = {**data.get("resources", {}), **resources}
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as e:
        raise InvalidSpec(errors=validation_errors(e, {}, f"{path} (with --gpu/--cpu/--memory)")) from None
    return (spec,), {"base_dir": path.resolve().parent}


def _follow(c, job_id: str) -> int:  # noqa: ANN001
    """Stream logs with a live status line while the job waits; the exit code is 0 only on success."""
    printer = LogPrinter(prefix=c.get(job_id).spec.replicas > 1)
    with err_console.status(f"{job_id}: waiting for the scheduler") as spinner:
        started = False
        for chunk in c.logs(job_id, follow=True):
            if not started:
                spinner.stop()
                started = True
            printer.add(chunk)
    printer.flush()
    info = c.get(job_id)
    points = c.metrics(job_id)
    if points:
        console.print(metrics_table(points))
    last = info.last_attempt
    err_console.print(f"{job_id} ", status_text(info.status.value), f" {info.reason or ''}".rstrip(),
                      f" (attempt {last.number}, {last.reason})" if last else "")
    return 0 if info.status.value == "succeeded" else 1


def ls(
    status: Annotated[Optional[list[str]], typer.Option("--status", "-s", help="only jobs in this status")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n")] = 50,
    output: OutputOpt = Output.table,
) -> None:
    """List jobs, newest first."""
    with handled():
        page = client().jobs(status=status, limit=limit)
        if output == Output.json:
            write(json.dumps([j.model_dump(mode="json") for j in page.items], indent=2) + "\n")
        else:
            console.print(jobs_table(page.items))


def show(job_id: JobArg, output: OutputOpt = Output.table) -> None:
    """Status, attempts (node, GPUs, exit code, reason) and, for a pending job, why it waits."""
    with handled():
        c = client()
        info = c.get(job_id)
        if output == Output.json:
            write(info.model_dump_json(indent=2) + "\n")
            return
        console.print(job_detail(info))
        points = c.metrics(job_id)
        if own := [p for p in points if not p.name.startswith("system/")]:  # system/…: the resource table's
            console.print(metrics_table(own))
        if used := resource_table(c.monitoring.job_usage(job_id)):
            console.print(used)


def logs(
    job_id: JobArg,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep streaming until the job ends")] = False,
    attempt: Annotated[Optional[int], typer.Option("--attempt", "-a", help="only this attempt")] = None,
    replica: Annotated[Optional[int], typer.Option("--replica", "-r", help="only this replica")] = None,
) -> None:
    """Print a job's logs: all attempts in order; replicas interleaved and prefixed unless --replica."""
    with handled():
        c = client()
        printer = LogPrinter(prefix=replica is None and c.get(job_id).spec.replicas > 1)
        for chunk in c.logs(job_id, follow=follow, attempt=attempt, replica=replica):
            printer.add(chunk)
        printer.flush()


class LogPrinter:
    """Writes log chunks; for gangs, whole lines prefixed ``[rN]`` (chunks of replicas interleave)."""

    def __init__(self, prefix: bool) -> None:
        self.prefix = prefix
        self.partial: dict[int, str] = {}

    def add(self, chunk) -> None:  # noqa: ANN001
        if not self.prefix:
            write(chunk.data)
            return
        text = self.partial.pop(chunk.replica, "") + chunk.data
        *lines, rest = text.split("\n")
        if rest:
            self.partial[chunk.replica] = rest
        write("".join(f"[r{chunk.replica}] {line}\n" for line in lines))

    def flush(self) -> None:
        for replica, rest in sorted(self.partial.items()):
            write(f"[r{replica}] {rest}\n")
        self.partial.clear()


def cancel(job_id: JobArg) -> None:
    """Cancel a job: pending jobs stop at once; running ones get SIGTERM, then a grace period."""
    with handled():
        info = client().cancel(job_id)
        console.print(job_id, status_text(info.status.value))


def download(
    job_id: JobArg,
    to: Annotated[Optional[Path], typer.Option("--to", help="folder (default ./<job id>)")] = None,
) -> None:
    """Download a job's outputs."""
    with handled():
        c = client()
        arts = c.outputs(job_id)
        if not arts:
            err_console.print(f"{job_id} has no outputs (yet)")
            raise typer.Exit(1)
        dest = c.download(job_id, to)
        total = sum(a.size for a in arts)
        console.print(f"{len(arts)} file(s), {total:,} bytes → {dest}", highlight=False)
