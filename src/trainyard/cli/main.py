"""The `trainyard` command. Every command goes through the SDK only."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from trainyard.cli import admin, clusters, doctor, events, init, jobs, pipelines, queues, services, tokens, top, toplevel, ui, usage
from trainyard.cli import server as server_cmd
from trainyard.cli.common import Output, client, console, handled, write
from trainyard.cli.render import nodes_table

app = typer.Typer(
    name="trainyard", no_args_is_help=True, cls=toplevel.SuggestingGroup,
    help="Run training jobs: say what a job needs, trainyard finds room for it and runs it.",
)
app.callback()(toplevel.main)
app.command()(jobs.run)
app.command("ls")(jobs.ls)
app.command()(jobs.show)
app.command()(jobs.logs)
app.command()(jobs.cancel)
app.command()(jobs.download)
app.command()(doctor.doctor)
app.command()(init.init)
app.command()(top.top)
app.command()(events.events)
app.command()(usage.usage)
app.command()(ui.ui)
app.add_typer(server_cmd.app, name="server")
app.add_typer(queues.app, name="queue")
app.add_typer(pipelines.app, name="pipeline")
app.add_typer(pipelines.artifact_app, name="artifact")
app.add_typer(clusters.app, name="cluster")
app.add_typer(services.app, name="service")
app.command()(services.serve)
app.add_typer(admin.app, name="admin")
app.add_typer(tokens.app, name="token")
app.command()(tokens.login)
app.command()(admin.audit)


@app.command()
def nodes(output: Annotated[Output, typer.Option("--output", "-o")] = Output.table) -> None:
    """Nodes with their capacity and what is in use."""
    with handled():
        ns = client().nodes()
        if output == Output.json:
            write(json.dumps([n.model_dump(mode="json") for n in ns], indent=2) + "\n")
        else:
            console.print(nodes_table(ns))


if __name__ == "__main__":
    app()
