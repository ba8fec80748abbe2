"""`trainyard usage`: GPU-, CPU- and memory-hours (and money) per team, user, queue or GPU type."""

from __future__ import annotations

import csv
import io
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from trainyard.cli.common import client, console, handled, write
from trainyard.spec.choices import UsageBy

if TYPE_CHECKING:
    from trainyard.cli.safe_text import Table
    from trainyard.spec.monitoring import UsageReport

class UsageOutput(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def usage(
    by: Annotated[UsageBy, typer.Option("--by", help="group by team, user, queue or gpu_type")] = UsageBy.team,
    since: Annotated[str, typer.Option("--since", help="how far back, e.g. 30d, 12h")] = "30d",
    output: Annotated[UsageOutput, typer.Option("--output", "-o")] = UsageOutput.table,
) -> None:
    """Resource-hours from attempt records of the jobs you may see (every team's for an admin); time lost to
    preemption and failures counted and shown apart."""
    with handled():
        report = client().monitoring.usage(by=by.value, since=since)
        if output == UsageOutput.json:
            write(report.model_dump_json(indent=2) + "\n")
        elif output == UsageOutput.csv:
            write(to_csv(report))
        else:
            console.print(usage_table(report, since))


def to_csv(report: UsageReport) -> str:
    from trainyard.spec.monitoring import UsageRow

    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=[report.by.value if c == "key" else c for c in UsageRow.model_fields], lineterminator="\n")
    w.writeheader()
    for row in report.rows:
        d = row.model_dump()
        d[report.by.value] = d.pop("key")
        w.writerow({k: ("" if v is None else round(v, 6) if isinstance(v, float) else v) for k, v in d.items()})
    return out.getvalue()


def usage_table(report: UsageReport, since: str) -> Table:
    from trainyard.cli.safe_text import Table

    money = report.currency is not None
    table = Table(title=f"usage by {report.by.value}, last {since}", box=None, header_style="bold",
                  title_justify="left")
    for col in (report.by.value.upper(), "ATTEMPTS", "GPU-H", "  preempted", "  failed", "CPU-H", "  preempted",
                "  failed", "MEM GiB-H", *([f"COST ({report.currency})"] if money else [])):
        table.add_column(col, justify="left" if col == report.by.value.upper() else "right")
    for r in report.rows:
        table.add_row(r.key, str(r.attempts), _h(r.gpu_hours), _h(r.gpu_hours_preempted), _h(r.gpu_hours_failed),
                      _h(r.cpu_hours), _h(r.cpu_hours_preempted), _h(r.cpu_hours_failed), _h(r.memory_gib_hours),
                      *([f"{r.cost:,.2f}"] if money else []))
    return table


def _h(hours: float) -> str:
    return f"{hours:,.1f}" if hours else "-"
