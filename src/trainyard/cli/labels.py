"""`trainyard label JOB KEY=VALUE... KEY-...`: change a job's labels after submit, as `kubectl label` does."""

from __future__ import annotations

from typing import Annotated

import typer

from trainyard.cli.common import Output, client, console, handled
from trainyard.cli.completion import job_ids
from trainyard.errors import InvalidSpec


def label(
    job_id: Annotated[str, typer.Argument(help="job id", autocompletion=job_ids)],
    changes: Annotated[list[str], typer.Argument(help="KEY=VALUE to set, KEY- to remove", show_default=False)],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="change labels already set to another value")] = False,
    output: Annotated[Output, typer.Option("--output", "-o", help="table (KEY=VALUE lines) or json")] = Output.table,
) -> None:
    """Set or remove labels of a job, running or ended (`experiment=baseline`, `keep-`), and print its labels
    after. A label already set to another value changes only with --overwrite. trainyard's own labels
    (`trainyard.io/…`) stay as it set them. Filter on them with `trainyard ls -l KEY=VALUE`."""
    with handled():
        wanted = parse(changes)
        labels = client().label(job_id, wanted, overwrite=overwrite)
    if output is Output.json:
        console.print_json(data={"job_id": job_id, "labels": labels})
        return
    for k, v in sorted(labels.items()):
        console.print(f"{k}={v}", markup=False, highlight=False)


def parse(changes: list[str]) -> dict[str, str | None]:
    """``["a=1", "b-"]`` as ``{"a": "1", "b": None}``; an argument of neither form, or one key twice, is refused
    naming it (the server checks what keys and values may be)."""
    out: dict[str, str | None] = {}
    for arg in changes:
        if "=" in arg:
            key, value = arg.split("=", 1)
        elif arg.endswith("-") and len(arg) > 1:
            key, value = arg[:-1], None
        else:
            raise _bad(f"{arg!r}: write KEY=VALUE to set a label, KEY- to remove it")
        if key in out:
            raise _bad(f"{arg!r}: label {key!r} is given twice")
        out[key] = value
    return out


def _bad(message: str) -> InvalidSpec:
    return InvalidSpec(errors=[{"field": None, "line": None, "where": "labels", "message": message}])
