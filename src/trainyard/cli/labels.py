"""`trainyard label JOB... KEY=VALUE... KEY-...`: change jobs' labels after submit, as `kubectl label` does."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from trainyard.cli.common import Output, client, console, each, err_console, handled, read_ids
from trainyard.cli.completion import job_ids
from trainyard.errors import InvalidSpec


def label(
    args: Annotated[list[str], typer.Argument(help="job ids (- reads them from stdin), then KEY=VALUE to set and "
                                              "KEY- to remove", autocompletion=job_ids, show_default=False,
                                              metavar="[JOB]... KEY=VALUE|KEY-...")],
    selector: Annotated[Optional[str], typer.Option("--selector", "-l", help="the jobs whose labels match this "
                                                    "selector (as `ls -l`), besides any named")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="change labels already set to another value")] = False,
    output: Annotated[Output, typer.Option("--output", "-o", help="table (KEY=VALUE lines) or json")] = Output.table,
) -> None:
    """Set or remove labels of jobs, running or ended (`experiment=baseline`, `scratch-`), and print their
    labels after: `trainyard label JOB best=yes`, `trainyard label -l experiment=wide keep=true`,
    `trainyard ls -s failed --ids | trainyard label - triaged=no`. A label already set to another value changes
    only with --overwrite. trainyard's own labels (`trainyard.io/…`) stay as it set them. A job labelled
    keep=true is left by the server's jobs retention. Exit 1 if a job's could not be changed, after the others."""
    named = [a for a in args if not _is_change(a)]
    with handled():
        wanted = parse([a for a in args if _is_change(a)])
        if selector is not None:
            _check_selector(selector)
        c = client()
        if not named and selector is None:
            raise _bad("no job: name one, - for ids on stdin, or --selector")
        jobs = read_ids(named)
        if selector is not None:
            jobs += [j.id for j in c.iter_jobs(labels=selector) if j.id not in jobs]
        if not jobs:  # `-` read none, or the selector matched none: as rm and cancel, nothing to do
            err_console.print("nothing to do: no job matched", highlight=False)
            raise typer.Exit(0)
    if len(jobs) == 1:  # its labels alone, as before any bulk change
        with handled():
            labels = _label(c, jobs[0], wanted, overwrite)
        if output is Output.json:
            console.print_json(data={"job_id": jobs[0], "labels": labels})
        else:
            for k, v in sorted(labels.items()):
                console.print(f"{k}={v}", markup=False, highlight=False)
        return
    done: list[dict] = []

    def change(job_id: str) -> str | None:
        labels = _label(c, job_id, wanted, overwrite)
        done.append({"job_id": job_id, "labels": labels})
        return None if output is Output.json else \
            f"{job_id} {','.join(f'{k}={v}' for k, v in sorted(labels.items())) or '(no labels)'}"

    try:
        each(jobs, change, "labelling", "not labelled")
    finally:  # those changed, also when another was refused
        if output is Output.json:
            console.print_json(data=done)


def _label(c, job_id: str, wanted: dict[str, str | None], overwrite: bool) -> dict[str, str]:  # noqa: ANN001
    """The job's labels after the change; a label already set otherwise names the flag that changes it; a bad key
    or value is said as the command's own refusals are (``labels: label key …``)."""
    from trainyard.errors import Conflict

    try:
        return c.label(job_id, wanted, overwrite=overwrite)
    except InvalidSpec as e:  # a key or value the server refused: said as the command's, not a spec's field
        # nor as a request body's (the user wrote no body)
        raise InvalidSpec(errors=[{**err, "field": None, "where": "labels", "in": None} for err in e.errors]) from None
    except Conflict as e:
        if "label" not in e.details:
            raise
        raise Conflict(f"{e.message} (--overwrite)", **e.details) from None


def _is_change(arg: str) -> bool:
    return "=" in arg or (arg.endswith("-") and len(arg) > 1)


def parse(changes: list[str]) -> dict[str, str | None]:
    """``["a=1", "b-"]`` as ``{"a": "1", "b": None}``; none at all, or one key twice, is refused naming it (the
    server checks what keys and values may be)."""
    out: dict[str, str | None] = {}
    for arg in changes:
        key, value = arg.split("=", 1) if "=" in arg else (arg[:-1], None)
        if key in out:
            raise _bad(f"{arg!r}: label {key!r} is given twice")
        out[key] = value
    if not out:
        raise _bad("no change: write KEY=VALUE to set a label, KEY- to remove it")
    return out


def _check_selector(selector: str) -> None:
    """A bad --selector named as the flag (the server would name its query parameter)."""
    from trainyard.spec.label_selector import SelectorError, parse_selector

    try:
        parse_selector(selector, "--selector")
    except SelectorError as e:
        raise InvalidSpec(errors=[{"field": None, "line": None, "where": "--selector", "message": e.problem}]) from None


def _bad(message: str) -> InvalidSpec:
    return InvalidSpec(errors=[{"field": None, "line": None, "where": "labels", "message": message}])
