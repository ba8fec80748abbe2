"""`trainyard server`: run the API server in the foreground, or stop/inspect the local one."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainyard.cli.common import WAIT_MAX, console, err_console, handled
from trainyard.cli.toplevel import SuggestingGroup
from trainyard.errors import InvalidSpec, TrainyardError

app = typer.Typer(cls=SuggestingGroup, help="Run the trainyard server (foreground), or manage the local background one.")


@app.callback(invoke_without_command=True)
def server(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="0: the last port if free, else any")] = 0,
    home: Annotated[Optional[Path], typer.Option(help="state folder (default $TRAINYARD_HOME)")] = None,
    db: Annotated[Optional[str], typer.Option(help="database URL, e.g. postgresql://user@host/db")] = None,
    artifacts: Annotated[Optional[str], typer.Option(help="artifact store URL (fsspec), e.g. s3://bucket/x")] = None,
    s3_endpoint_url: Annotated[Optional[str], typer.Option(
        "--s3-endpoint-url", help="endpoint of an S3-compatible store (MinIO, Ceph) for s3:// artifacts; "
                                  "credentials from the AWS variables and config")] = None,
    engine: Annotated[str, typer.Option(help="where jobs run: local or ray")] = "local",
    container_runtime: Annotated[str, typer.Option(
        "--container-runtime", help="what runs `image:` jobs (engine local): auto, podman, docker, or none "
                                    "(host only)")] = "auto",
    ray_address: Annotated[Optional[str], typer.Option("--ray-address", envvar="RAY_ADDRESS",
                                                       help="Ray cluster for --engine ray: HOST:PORT of its head")] = None,
    cpus: Annotated[Optional[float], typer.Option(help="declare CPU capacity instead of detecting it")] = None,
    memory: Annotated[Optional[str], typer.Option(help="declare memory, e.g. 8Gi")] = None,
    gpus: Annotated[Optional[int], typer.Option(help="declare this many GPUs")] = None,
    gpu_type: Annotated[Optional[str], typer.Option("--gpu-type", help="type of the declared GPUs, e.g. A100")] = None,
    token_file: Annotated[Optional[Path], typer.Option(
        "--token-file", help="require the bearer token in this file (or $TRAINYARD_SERVER_TOKEN); "
                             "default: the home's own token, readable only by you")] = None,
    token: Annotated[Optional[str], typer.Option(hidden=True)] = None,
    auth: Annotated[bool, typer.Option("--auth", help="users, teams and their tokens (needed beyond loopback)")] = False,
    tls_cert: Annotated[Optional[Path], typer.Option("--tls-cert", help="serve HTTPS: certificate (PEM)")] = None,
    tls_key: Annotated[Optional[Path], typer.Option("--tls-key", help="serve HTTPS: private key (PEM)")] = None,
    forwarded_allow_ips: Annotated[Optional[str], typer.Option(
        "--forwarded-allow-ips", help="proxies (comma-separated IPs, or *) whose X-Forwarded-For and "
                                      "X-Forwarded-Proto headers are trusted; default: none")] = None,
    front: Annotated[str, typer.Option(
        "--front", help="nginx: nginx listens and sends small /serve/ requests straight to ready replicas "
                        "(needs nginx installed); none: this server listens itself")] = "none",
    queues: Annotated[Optional[Path], typer.Option(help="YAML file of queues to load (see `trainyard queue create -f`)")] = None,
    component_catalog: Annotated[Optional[list[str]], typer.Option(
        "--component-catalog", help="a folder or URL of Kubeflow components (repeatable)")] = None,
    config: Annotated[Optional[Path], typer.Option(
        "--config", help="YAML of further settings: sample_every, idle_gpu_threshold, idle_gpu_period, log_keep, "
                "metrics_keep, outputs_max, pids_max, cpu_limit, start_deadline, prices, scheduler (the planner's "
                "options), webhooks, retention, secrets_key_file")
    ] = None,
) -> None:
    from trainyard import startup

    if ctx.invoked_subcommand is not None:  # `stop` or `status`: no server starts
        startup.unguard()
        return
    from trainyard.config import ServerSettings, home as default_home
    from trainyard.server import check_gpu_type, serve
    from trainyard.spec.units import parse_memory

    with handled():
        if token is not None:
            raise TrainyardError("--token would show in `ps` to every user of this machine; "
                                 "use --token-file FILE or $TRAINYARD_SERVER_TOKEN")
        from trainyard.cli import server_config

        try:
            declared_memory = parse_memory(memory) if memory is not None else None
        except ValueError as e:
            raise InvalidSpec.flag("--memory", str(e)) from None
        extra = server_config.load(config) if config else {}
        settings = server_config.check(config or Path("--config"), lambda: ServerSettings(
            **extra, home=home or default_home(), db=db, artifacts=artifacts, s3_endpoint_url=s3_endpoint_url,
            host=host, port=port, engine=engine,
            container_runtime=container_runtime,
            cpus=cpus, memory=declared_memory, gpus=gpus, gpu_type=gpu_type,
            token=_server_token(token_file), auth=auth,
            # absolute: launchers, started in their jobs' folders, read the certificate too
            tls_cert=tls_cert.resolve() if tls_cert else None, tls_key=tls_key.resolve() if tls_key else None,
            forwarded_allow_ips=forwarded_allow_ips, front=front,
            queues_file=queues,
            component_catalog=[c if "://" in c else str(Path(c).resolve()) for c in component_catalog or []],
            ray_address=ray_address,
        ))
        check_gpu_type(settings)
        serve(settings)


def _server_token(path: Path | None) -> str | None:
    """The token from ``--token-file`` or ``$TRAINYARD_SERVER_TOKEN``; the variable is removed at once,
    so nothing this server starts (launchers, jobs) inherits it."""
    from trainyard.config import take_server_token

    from_env = take_server_token()
    if path is None:
        return from_env or None
    try:
        token = path.read_text().strip()
    except OSError as e:
        raise TrainyardError(f"--token-file {path}: {e.strerror}") from None
    if not token:
        raise TrainyardError(f"--token-file {path}: the file is empty")
    return token


@app.command()
def stop(timeout: Annotated[float, typer.Option(min=0, max=WAIT_MAX, help="seconds to wait")] = 20.0) -> None:
    """Stop the local background server. Running jobs keep running and are found again on restart."""
    from trainyard.config import ADDRESS_FILE, home
    from trainyard.home import read_address

    info = read_address(home() / ADDRESS_FILE)
    if not info:
        err_console.print("no local server is running")
        return
    try:
        os.kill(info["pid"], signal.SIGTERM)
    except ProcessLookupError:
        (home() / ADDRESS_FILE).unlink(missing_ok=True)
        err_console.print("no local server is running (removed a stale address file)")
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(info["pid"], 0)
        except ProcessLookupError:
            console.print(f"stopped the server at {info['url']}")
            return
        time.sleep(0.1)
    err_console.print(f"[red]server {info['pid']} did not stop in {timeout:.0f}s[/red]")
    raise typer.Exit(1)


@app.command()
def status() -> None:
    """Where the server is, and whether it answers."""
    from trainyard.sdk.discovery import resolve_server

    with handled():
        url = resolve_server(autostart=False)
        console.print(f"server at {url}")
