"""`trainyard nodes`: the cluster's nodes, with their capacity and what is in use; an admin's cordons and drains."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from trainyard.cli.common import WAIT_MAX, Output, client, console, err_console, handled, write
from trainyard.cli.toplevel import SuggestingGroup

app = typer.Typer(cls=SuggestingGroup, invoke_without_command=True,
                  help="Nodes with their capacity and what is in use; cordon, drain and uncordon them (admins).")
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]
ReasonOpt = Annotated[Optional[str], typer.Option("--reason", "-r", help="why: shown beside the node and audited")]


@app.callback()
def nodes(ctx: typer.Context, output: OutputOpt = Output.table) -> None:
    """Nodes with their capacity, what is in use, and which are cordoned (`trainyard nodes ls`)."""
    if ctx.invoked_subcommand is None:
        _list(output)


@app.command("ls")
def ls(output: OutputOpt = Output.table) -> None:
    """Nodes with their capacity, what is in use, and which are cordoned."""
    _list(output)


def _list(output: Output) -> None:
    from trainyard.cli.listing import said_empty
    from trainyard.cli.render import nodes_table

    with handled():
        ns = client().nodes()
        if output == Output.json:
            write(json.dumps([n.model_dump(mode="json") for n in ns], indent=2) + "\n")
        elif not said_empty(ns, "nodes"):
            console.print(nodes_table(ns))


@app.command()
def cordon(node: str, reason: ReasonOpt = None) -> None:
    """Place no new attempt on NODE; what runs there goes on (Slurm's drain)."""
    with handled():
        n = client().cordon(node, reason)
        console.print(f"node [bold]{n.name}[/bold] cordoned: {_running(n.attempts)} there go on", highlight=False)


@app.command()
def drain(node: str, reason: ReasonOpt = None,
          wait: Annotated[bool, typer.Option("--wait/--no-wait", help="return once nothing runs there")] = True,
          timeout: Annotated[Optional[float], typer.Option(
              min=0, max=WAIT_MAX, help="with --wait: give up after this many seconds (exit 124; the node stays "
                                        "cordoned)")] = None) -> None:
    """Cordon NODE and stop what runs there (checkpoint signal, grace period), putting those jobs back in line.
    Their attempts end NodeDrained, which is not counted as a retry."""
    with handled():
        from trainyard.sdk import nodes as sdk_nodes

        c = client()
        drained = c.drain(node, reason)
        console.print(f"node [bold]{node}[/bold] cordoned; {len(drained.stopped)} attempt"
                      f"{'s' if len(drained.stopped) != 1 else ''} told to stop"
                      + (f": {', '.join(drained.stopped)}" if drained.stopped else ""), highlight=False)
        if not wait:
            return
        first = drained.node.attempts
        with err_console.status(f"{node}: waiting for {_running(first)} to stop") as spinner:
            def progress(n) -> None:  # noqa: ANN001
                spinner.update(f"{node}: {_running(n.attempts)} left of {max(first, n.attempts)}")

            sdk_nodes.wait_empty(c.http, node, timeout, progress)
        console.print(f"node [bold]{node}[/bold] drained: nothing runs there", highlight=False)


@app.command()
def uncordon(node: str) -> None:
    """Let new attempts onto NODE again."""
    with handled():
        n = client().uncordon(node)
        console.print(f"node [bold]{node}[/bold] uncordoned" + ("" if n else " (it is not in the cluster now)"),
                      highlight=False)


def _running(n: int) -> str:
    return f"{n} attempt{'s' if n != 1 else ''}"
