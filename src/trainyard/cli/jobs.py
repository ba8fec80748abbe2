"""Job commands: run, rerun, wait, ls, show, logs, cancel, rm, download."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainyard.cli.completion import job_ids
from trainyard.cli.common import (WAIT_MAX, Output, client, console, delete_each, each, err_console, handled, ids_of,
                                  write)
from trainyard.cli.output import LogPrinter
from trainyard.cli.render import job_detail, jobs_table, metrics_table, status_text
from trainyard.cli.resources import resource_table
from trainyard.spec.choices import LOG_TAIL_MAX

ParamOpt = Annotated[Optional[list[str]], typer.Option("--param", "-p", help="override a param: key=value")]
JobArg = Annotated[str, typer.Argument(help="job id, or name (the newest job of that name)", autocompletion=job_ids)]
RES, ENV = "Resources", "Environment"
OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table or json")]
FollowOpt = Annotated[bool, typer.Option("--follow", "-f", help="stream logs until the job ends")]
WaitOpt = Annotated[bool, typer.Option("--wait", "-w",
                                        help="return when the job ends (exit code 0 only if it succeeded)")]


def run(
    target: Annotated[Optional[list[str]], typer.Argument(
        help="a job spec (YAML), a notebook (.ipynb), a script (.py, run with python), "
             "or after -- any command, run in this folder", show_default=False)] = None,
    param: ParamOpt = None,
    follow: FollowOpt = False,
    wait: WaitOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the spec (YAML) instead of submitting it")] = False,
    cpu: Annotated[Optional[str], typer.Option("--cpu", help="cores, e.g. 2 or 500m", rich_help_panel=RES)] = None,
    memory: Annotated[Optional[str], typer.Option("--memory", help="e.g. 4Gi", rich_help_panel=RES)] = None,
    gpu: Annotated[Optional[int], typer.Option("--gpu", help="GPUs per replica", rich_help_panel=RES)] = None,
    gpu_type: Annotated[Optional[list[str]], typer.Option(
        "--gpu-type", help="GPU type; repeat for acceptable types in order of preference", rich_help_panel=RES)] = None,
    node_selector: Annotated[Optional[list[str]], typer.Option(
        "--node-selector", help="node label: key=value", rich_help_panel=RES)] = None,
    image: Annotated[Optional[str], typer.Option("--image", help="container image", rich_help_panel=ENV)] = None,
    pip: Annotated[Optional[list[str]], typer.Option("--pip", help="a package for the job's virtualenv",
                                                     rich_help_panel=ENV)] = None,
    requirements: Annotated[Optional[Path], typer.Option("--requirements", help="a requirements file",
                                                         rich_help_panel=ENV)] = None,
    env: Annotated[Optional[list[str]], typer.Option("--env", "-e", help="environment variable: KEY=VALUE",
                                                     rich_help_panel=ENV)] = None,
    secret: Annotated[Optional[list[str]], typer.Option(
        "--secret", help="a team secret in the environment: NAME, or VARIABLE=NAME (see `trainyard secret`)",
        rich_help_panel=ENV)] = None,
    queue: Annotated[Optional[str], typer.Option("--queue", "-q", help="queue to submit to")] = None,
    name: Annotated[Optional[str], typer.Option("--name", "-n", help="job name")] = None,
    timeout: Annotated[Optional[str], typer.Option("--timeout", help="e.g. 30m, 2h")] = None,
    retries: Annotated[Optional[int], typer.Option("--retries", help="retries after the first attempt")] = None,
    priority: Annotated[Optional[str], typer.Option("--priority", help="low, normal, high, urgent or an integer")] = None,
    after: Annotated[Optional[list[str]], typer.Option(
        "--after", help="start once this job has succeeded; JOB:failed or JOB:ended for other ends; repeatable")] = None,
    label: Annotated[Optional[list[str]], typer.Option(
        "--label", "-l", help="tag the job: key=value, repeatable (trainyard ls --label key=value)")] = None,
) -> None:
    """Submit a job. Prints its id and returns at once, with --wait when it ends, or with --follow streams its logs.

    \b
      trainyard run job.yaml -p lr=0.1
      trainyard run train.py -- --lr 0.1          # python train.py --lr 0.1, this folder as work dir
      trainyard run --gpu 1 --pip torch -- python train.py --lr 0.1
      trainyard run --dry-run -- python train.py > job.yaml   # keep it as a spec
      trainyard run --after j-1a2b3c4d5e -- python evaluate.py  # once that job has succeeded

    Flags override what a spec file says. A notebook runs with papermill: -p values go into its cell
    tagged `parameters`, and the executed notebook is in the job's outputs (`trainyard download JOB`)."""
    from trainyard.cli.runspec import Flags, build, key_values, placed_at, secret_flags, to_yaml
    from trainyard.spec.loader import parse_param_overrides

    with handled():
        flags = Flags(
            params=parse_param_overrides(param or []), cpu=cpu, memory=memory, gpu=gpu, gpu_type=gpu_type or [],
            node_selector=key_values(node_selector or [], "--node-selector"), image=image, pip=pip or [],
            requirements=str(requirements) if requirements else None, queue=queue, name=name,
            env_vars=key_values(env or [], "--env"), timeout=timeout, retries=retries, priority=priority,
            secrets=secret_flags(secret or []), after=list(after or []),
            labels=key_values(label or [], "--label"))
        sub = build(list(target or []), flags, Path.cwd())
        if sub.undeclared:
            from rich.markup import escape

            from trainyard.spec.loader import undeclared_params

            declared = {k: v for k, v in sub.spec.params.items() if k not in sub.undeclared}
            err_console.print("[yellow]warning:[/yellow] " + escape(undeclared_params(target[0], sub.undeclared,
                                                                                       declared)), highlight=False)
        if dry_run:
            write(to_yaml(sub.spec))
            return
        c = client()
        # the spec build() read, -p put in (an undeclared one said above, in the CLI's words), not the file read
        # again: a Kubeflow manifest's warnings are said once
        with placed_at(sub.path):
            job = c.submit(sub.spec, base_dir=sub.base_dir)
        _submitted(c, job, wait, follow)


def rerun(job_id: JobArg, param: ParamOpt = None, follow: FollowOpt = False, wait: WaitOpt = False,
          priority: Annotated[Optional[str], typer.Option(
              "--priority", help="low, normal, high, urgent or an integer, over the job's own; above its queue's "
                                 "max_priority (normal without one) only an admin's is taken")] = None) -> None:
    """Submit a job again as a new job: its spec and code as they were, -p params and --priority over its own.
    Prints the new id.

    \b
      trainyard rerun j-1a2b3c4d5e -p lr=0.01 --follow
      trainyard rerun j-1a2b3c4d5e --priority high"""
    from trainyard.cli.queues import priority_arg
    from trainyard.spec.loader import parse_param_overrides

    from trainyard.cli.job_ref import job_id_of

    with handled():
        c = client()
        job = c.rerun(job_id_of(job_id), params=parse_param_overrides(param or []),
                      priority=None if priority is None else priority_arg(priority))
        _submitted(c, job, wait, follow)


def _submitted(c, job, wait: bool, follow: bool) -> None:  # noqa: ANN001
    """What `run` and `rerun` do once the job is in: its id (and how it ended, with --wait), or its logs."""
    if not follow:
        write(job.id + "\n")
        if wait:
            raise typer.Exit(_ended(job.wait()))
        return
    err_console.print(f"submitted [bold]{job.id}[/bold] ({job.info.name})", highlight=False)
    raise typer.Exit(_follow(c, job.id))


def _ended(info) -> int:  # noqa: ANN001
    """Say how the job ended (on stderr: stdout keeps just the id); the exit code, 0 only on success."""
    from trainyard.cli.ended import ending

    head, status, tail = ending(info.model_dump(mode="json"))
    err_console.print(head, status_text(status), tail, sep="", highlight=False)
    return 0 if status == "succeeded" else 1


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
        console.print(metrics_table([p.model_dump(mode="json") for p in points]))
    return _ended(info)


def wait(
    jobs: Annotated[Optional[list[str]], typer.Argument(
        help="job ids; - reads them from stdin (trainyard ls --ids); none: nothing to do", autocompletion=job_ids,
        show_default=False)] = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", "-t", min=0, max=WAIT_MAX,
                                                     help="give up after this many seconds (exit 124)")] = None,
) -> None:
    """Wait until jobs end, saying how each ended as it does; exit 0 only if every one succeeded (1 if one did
    not, 124 when --timeout passed first)."""
    from rich.progress import Progress

    ids, failed = ids_of(jobs, none_is_done=True), 0  # `wait $(trainyard ls … --ids)` finding none, as rm
    with handled():
        c = client()
        # each ending is said above the bar as it comes (rich prints through the live display); no bar for
        # one job, nor where no one watches (a script's captured stderr keeps just the lines)
        with Progress(console=err_console, transient=True, disable=len(ids) < 2 or not err_console.is_terminal) as bar:
            task = bar.add_task("waiting", total=len(ids))

            def said(info) -> None:  # noqa: ANN001
                nonlocal failed
                failed += _ended(info) != 0
                bar.advance(task)

            c.wait_all(ids, timeout, on_end=said)  # past --timeout: handled() exits 124
    raise typer.Exit(1 if failed else 0)


def ls(
    status: Annotated[Optional[list[str]], typer.Option("--status", "-s", help="only jobs in this status (repeat)")] = None,
    queue: Annotated[Optional[str], typer.Option("--queue", "-q", help="only jobs of this queue")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="only jobs of this name")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="submitted within (2h, 3d) or since (2024-05-01)")] = None,
    before: Annotated[Optional[str], typer.Option("--before", help="submitted longer ago (30d) or before (2024-05-01)")]
    = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="at most this many jobs")] = 50,
    all_: Annotated[bool, typer.Option("--all", "-a", help="every matching job, page after page")] = False,
    after: Annotated[Optional[str], typer.Option("--after", help="continue a listing where it stopped")] = None,
    label: Annotated[Optional[list[str]], typer.Option(
        "--label", "-l", help="only jobs these labels select: key=value, key!=value, 'key in (a,b)', "
        "'key notin (a,b)', key, !key; comma-separated or repeated: all of them")] = None,
    sort: Annotated[str, typer.Option("--sort", help="order: created, name, status or queue; '-' first for "
                                      "descending (default -created, newest first)")] = "-created",
    show_labels: Annotated[bool, typer.Option("--show-labels", help="a LABELS column")] = False,
    output: OutputOpt = Output.table,
    ids: Annotated[bool, typer.Option("--ids", help="only the ids, one a line: trainyard rm $(trainyard ls "
                                      "-s failed --ids --all)")] = False,
) -> None:
    """List jobs, newest first (or --sort), filtered; long histories come in pages (--after, --all)."""
    from trainyard.cli.listing import (check_queue, check_sort, check_statuses, labels_of, pages, parse_since,
                                       said_empty)
    from trainyard.cli.reading import read

    with handled():
        check_statuses(status or [])
        by_offset = check_sort(sort, after)
        filters = {"status": status, "queue": queue, "name": name, "since": parse_since(since),
                   "until": parse_since(before, "--before"), "labels": labels_of(label or []),
                   "sort": None if sort == "-created" else sort}

        def listed(source):  # noqa: ANN001, ANN202  (trainyard.cli.reading: the server's JSON, or the SDK's)
            def fetch(want: int, cursor: str | None) -> tuple[list, str | None]:
                if not by_offset:
                    page = source.jobs(limit=want, cursor=cursor, **filters)
                    return page["items"], page["next_cursor"]
                skip = int(cursor or 0)  # a sort other than submit order pages by offset
                page = source.jobs(limit=want, offset=skip or None, **filters)
                return page["items"], str(skip + len(page["items"])) if page["more"] else None
            return pages(fetch, limit=None if all_ else limit, cursor=after)

        # JSON is the models' own dump, as it always was: the plain reads would hand on the server's as it is
        jobs, more = read(listed, plain=output == Output.table or ids)
        if not jobs:
            check_queue(queue)
        if ids:
            write("".join(f"{j['id']}\n" for j in jobs))
        elif output == Output.json:
            write(json.dumps(jobs, indent=2) + "\n")
        elif not said_empty(jobs, "jobs", {"--status": status, "--queue": queue, "--name": name, "--since": since,
                                           "--before": before, "--label": label, "--after": after}):
            console.print(jobs_table(jobs, show_labels))
        if more:
            hint = "raise --limit" if by_offset else f"add --after {more}"
            err_console.print(f"{len(jobs)} shown; more: {hint} (or --all)", highlight=False)


def show(job_id: JobArg, output: OutputOpt = Output.table) -> None:
    """Status, attempts (node, GPUs, exit code, reason) and, for a pending job, why it waits."""
    from trainyard.cli.job_ref import job_id_of, named_id
    from trainyard.cli.reading import read

    def shown(source):  # noqa: ANN001, ANN202
        one = named_id(source, job_id)
        return source.job(one), source.metrics(one), source.usage(one)

    with handled():
        if output == Output.json:
            write(client().get(job_id_of(job_id)).model_dump_json(indent=2) + "\n")
            return
        # the job's own metrics; its system/… samples make the resource table
        info, points, usage = read(shown)
        console.print(job_detail(info))
        if points:
            console.print(metrics_table(points))
        if used := resource_table(usage):
            console.print(used)


def logs(
    job_id: JobArg,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep streaming until the job ends")] = False,
    attempt: Annotated[Optional[int], typer.Option("--attempt", "-a", min=1, help="only this attempt")] = None,
    replica: Annotated[Optional[int], typer.Option("--replica", "-r", min=0, help="only this replica")] = None,
    tail: Annotated[Optional[int], typer.Option("--tail", "-n", min=0, max=LOG_TAIL_MAX,
                                                help="only the last N lines (with -f: then what comes)")] = None,
) -> None:
    """Print a job's logs: all attempts in order; replicas interleaved and prefixed unless --replica."""
    from trainyard.cli.job_ref import named_id
    from trainyard.cli.reading import read

    def printed(source) -> None:  # noqa: ANN001
        one = named_id(source, job_id)
        job = source.job(one)
        _has_log(one, job, attempt, replica, follow)
        printer = LogPrinter(prefix=replica is None and job["spec"]["replicas"] > 1)
        for chunk in source.logs(one, follow=follow, attempt=attempt, replica=replica, tail=tail):
            printer.add(chunk)
        printer.flush()

    with handled():
        read(printed, plain=not follow)  # following (server-sent events, reconnecting) is the SDK's


def _has_log(job_id: str, job: dict, attempt: int | None, replica: int | None, follow: bool) -> None:
    """NotFound for an attempt or replica the job has not had (an empty log would read as one that printed
    nothing); following a job that has not ended, a later attempt may still come."""
    from trainyard.errors import NotFound

    replicas = job["spec"]["replicas"]
    if replica is not None and replica >= replicas:
        raise NotFound(f"job {job_id} has no replica {replica} (replicas 0 to {replicas - 1})"
                       if replicas > 1 else f"job {job_id} has no replica {replica} (only replica 0)")
    had = len(job["attempts"])
    if attempt is not None and attempt > had and (not follow or job["status"] in ENDED):
        raise NotFound(f"job {job_id} has no attempt {attempt} (it has had {had})")


ENDED = ("succeeded", "failed", "cancelled")


def cancel(jobs: Annotated[Optional[list[str]], typer.Argument(
        help="job ids; - reads them from stdin (trainyard ls --ids); none: nothing to do", autocompletion=job_ids,
        show_default=False)] = None) -> None:
    """Cancel jobs: pending jobs stop at once; running ones get SIGTERM, then a grace period. Each job's status
    after is printed; exit 1 if one could not be cancelled (not found, not yours), after trying the others."""
    ids = ids_of(jobs, none_is_done=True)
    with handled():
        c = client()
    each(ids, lambda job_id: f"{job_id} {status_text(c.cancel(job_id).status.value).markup}",
         "cancelling", "not cancelled")


def rm(jobs: Annotated[Optional[list[str]], typer.Argument(
        help="ids of ended jobs; - reads them from stdin (trainyard ls --ids); none: nothing to do",
        autocompletion=job_ids, show_default=False)] = None) -> None:
    """Delete ended jobs: their attempts, logs, metrics, outputs and checkpoints. What they used stays in
    `trainyard usage`. A running job, or one that is part of a pipeline run, sweep or service, is refused."""
    ids = ids_of(jobs, none_is_done=True)
    with handled():
        c = client()
    delete_each(ids, c.delete)


def download(
    job_id: JobArg,
    to: Annotated[Optional[Path], typer.Option("--to", help="folder (default ./<job id>)")] = None,
    attempt: Annotated[Optional[int], typer.Option(
        "--attempt", "-a", min=1, help="this attempt's outputs (default: the final attempt's, the newest that ended)")
    ] = None,
) -> None:
    """Download a job's outputs: those of its final attempt (once it succeeded, the one that did), or of
    --attempt N. A sweep's id downloads its best trial's."""
    with handled():
        c = client()
        from trainyard.cli.sweeps import SWEEP_OR_SERVICE, best_trial_job

        from trainyard.cli.job_ref import job_id_of

        if job_id.startswith(SWEEP_OR_SERVICE):  # a sweep's id: its best trial's job (a service's: refused)
            job_id = best_trial_job(c, job_id, "download")
        else:
            job_id = job_id_of(job_id)
        shown = c.outputs_of(job_id, attempt)
        if shown.attempt is None:
            err_console.print(f"{job_id} has no outputs yet: no attempt has ended")
            raise typer.Exit(1)
        if not shown.files:
            err_console.print(f"{job_id} has no outputs from attempt {shown.attempt}"
                              + ("" if attempt else " (its final attempt; others: --attempt N)"))
            raise typer.Exit(1)
        dest = c.download_outputs(job_id, shown, to)
        total = sum(a.size for a in shown.files)
        console.print(f"attempt {shown.attempt}: {len(shown.files)} file(s), {total:,} bytes → {dest}",
                      highlight=False)
