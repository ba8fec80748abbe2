"""Running the API server: hold the home, bind, announce the address, serve, clean up."""

from __future__ import annotations

import json
import logging
import os
import socket

from trainyard.config import ServerSettings
from trainyard.home import HomeLock, local_token, read_address, secure, write_private
from trainyard.store.db import normalize_url
from trainyard.auth.tokens import token_hash

log = logging.getLogger("trainyard.server")
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _bind(host: str, port: int, previous: int | None) -> socket.socket:
    """Bind ``port``; for 0, try the port of the last run first, so launchers find us again."""
    for candidate in ([previous] if port == 0 and previous else []) + [port]:
        # IPPROTO_TCP explicitly: with proto 0 asyncio does not set TCP_NODELAY on accepted
        # connections, and Nagle plus delayed ACKs add ~40 ms to every kept-alive response
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM,
                             socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.bind((host, candidate))
        except OSError:
            sock.close()
            if candidate == port:
                raise
            continue
        sock.listen(128)
        return sock
    raise OSError(f"cannot bind {host}:{port}")


def serve(settings: ServerSettings) -> None:
    """Serve until SIGTERM/SIGINT. Jobs keep running when the server stops."""
    import uvicorn

    from trainyard.api.app import create_app
    from trainyard.services.platform import Platform

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    secure(settings.home)
    # SQLite: this server alone. PostgreSQL: servers sharing the database may share the home, and a
    # lease in the database picks the one that schedules; either way no auto-started server joins them
    sqlite = normalize_url(settings.db_url).startswith("sqlite")
    HomeLock(settings.home).acquire(shared=not sqlite)  # held until this process ends
    if settings.token_sha256 is None:  # no token given: the home's own, which only this Unix user can read
        settings = settings.model_copy(update={"token_sha256": token_hash(local_token(settings.home, create=True))})
    previous = (read_address(settings.address_file) or {}).get("port")
    sock = _bind(settings.host, settings.port, previous)
    host, port = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    platform = Platform(settings)
    platform.artifacts.probe()  # wrong credentials or an unreachable store: a plain error now, not at the first job
    me = {"url": url, "port": port, "pid": os.getpid(), "home": str(settings.home)}

    def announce() -> None:
        # the leader's address, where the CLI and every launcher look (a follower only logs its own)
        write_private(settings.address_file, json.dumps(me))
        log.info("trainyard server on %s (engine %s, home %s): scheduling", url, platform.engine.name, settings.home)

    def ready() -> None:
        if not platform.leader:
            log.info("trainyard server on %s (engine %s, home %s): another server schedules; this one "
                     "serves the API and takes over if that one stops", url, platform.engine.name, settings.home)

    def withdraw() -> None:
        # here, not after run(): uvicorn re-raises SIGTERM once it has shut down
        if (read_address(settings.address_file) or {}).get("pid") == os.getpid():
            settings.address_file.unlink(missing_ok=True)

    hosts = LOOPBACK if settings.host in LOOPBACK else None  # a loopback server answers no other name
    app = create_app(platform, server_url=url, on_ready=ready, on_stop=withdraw, on_lead=announce,
                     allowed_hosts=hosts)

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
