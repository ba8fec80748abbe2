"""The `trainyard` command. Every command goes through the SDK only.

Each command's module is imported when that command runs (:mod:`trainyard.cli.lazy`): a process runs
one command, and importing and building the other thirty cost every command, ``run`` and ``ls``
included. The table is in the order ``--help`` lists them: commands, then groups of commands.
"""

from __future__ import annotations

import typer

from trainyard.cli import toplevel
from trainyard.cli.lazy import LazyGroup

COMMANDS = {
    "run": "trainyard.cli.jobs:run",
    "rerun": "trainyard.cli.jobs:rerun",
    "wait": "trainyard.cli.jobs:wait",
    "ls": "trainyard.cli.jobs:ls",
    "show": "trainyard.cli.jobs:show",
    "logs": "trainyard.cli.jobs:logs",
    "stack": "trainyard.cli.replica_requests:stack",
    "exec": "trainyard.cli.replica_requests:exec_",
    "label": "trainyard.cli.labels:label",
    "cancel": "trainyard.cli.jobs:cancel",
    "rm": "trainyard.cli.jobs:rm",
    "download": "trainyard.cli.jobs:download",
    "doctor": "trainyard.cli.doctor:doctor",
    "init": "trainyard.cli.init:init",
    "top": "trainyard.cli.top:top",
    "events": "trainyard.cli.events:events",
    "usage": "trainyard.cli.usage:usage",
    "ui": "trainyard.cli.ui:ui",
    "serve": "trainyard.cli.services:serve",
    "login": "trainyard.cli.tokens:login",
    "audit": "trainyard.cli.admin:audit",
    "nodes": "trainyard.cli.nodes:app",
    "server": "trainyard.cli.server:app",
    "queue": "trainyard.cli.queues:app",
    "pipeline": "trainyard.cli.pipelines:app",
    "artifact": "trainyard.cli.pipelines:artifact_app",
    "cluster": "trainyard.cli.clusters:app",
    "sweep": "trainyard.cli.sweeps:app",
    "schedule": "trainyard.cli.schedules:app",
    "service": "trainyard.cli.services:app",
    "admin": "trainyard.cli.admin:app",
    "token": "trainyard.cli.tokens:app",
    "secret": "trainyard.cli.secrets:app",
    "notify": "trainyard.cli.notify:app",
}


class TrainyardGroup(LazyGroup):
    lazy = COMMANDS


app = typer.Typer(
    name="trainyard", no_args_is_help=True, cls=TrainyardGroup,
    help="Run training jobs: say what a job needs, trainyard finds room for it and runs it.",
)
app.callback()(toplevel.main)


if __name__ == "__main__":
    app()
