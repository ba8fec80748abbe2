"""`trainyard events JOB`: every status change of a job (or, with --pipeline, a pipeline run)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from trainyard.cli.common import Output, client, console, handled, write
from trainyard.cli.render import status_text

if TYPE_CHECKING:
    from trainyard.cli.safe_text import Table
    from trainyard.spec.monitoring import EventInfo


def events(
    object_id: Annotated[str, typer.Argument(metavar="JOB",
                                             help="job id or name (or pipeline run's with --pipeline)")],
    pipeline: Annotated[bool, typer.Option("--pipeline", help="the id is a pipeline run's")] = False,
    output: Annotated[Output, typer.Option("--output", "-o")] = Output.table,
) -> None:
    """Status changes, oldest first: when, from what to what, why, and who caused it."""
    from trainyard.cli.job_ref import job_id_of, run_id_of

    with handled():
        c = client()
        m = c.monitoring
        found = m.run_events(run_id_of(c.pipelines, object_id)) if pipeline else m.events(job_id_of(object_id))
        if output == Output.json:
            write(json.dumps([e.model_dump(mode="json") for e in found], indent=2) + "\n")
        else:
            console.print(events_table(found))


def events_table(found: list[EventInfo]) -> Table:
    from trainyard.cli.safe_text import Table

    table = Table(box=None, header_style="bold")
    for col in ("TIME", "FROM", "TO", "BY", "REASON"):
        table.add_column(col)
    for e in found:
        table.add_row(datetime.fromtimestamp(e.ts).strftime("%Y-%m-%d %H:%M:%S"), e.old_status or "-",
                      status_text(e.new_status), e.actor, e.reason or "")
    return table
