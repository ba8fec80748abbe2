"""`trainyard nodes`: the cluster's nodes, with their capacity and what is in use."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from trainyard.cli.common import Output, client, console, handled, write


def nodes(output: Annotated[Output, typer.Option("--output", "-o")] = Output.table) -> None:
    """Nodes with their capacity and what is in use."""
    from trainyard.cli.render import nodes_table

    with handled():
        ns = client().nodes()
        if output == Output.json:
            write(json.dumps([n.model_dump(mode="json") for n in ns], indent=2) + "\n")
        else:
            console.print(nodes_table(ns))
