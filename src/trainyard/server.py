"""Running the API server: bind, write the address file, serve, clean up."""

from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path

from trainyard.config import ServerSettings

log = logging.getLogger("trainyard.server")


def read_address(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


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
    settings.home.mkdir(parents=True, exist_ok=True)
    previous = (read_address(settings.address_file) or {}).get("port")
    sock = _bind(settings.host, settings.port, previous)
    host, port = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    platform = Platform(settings)
    me = {"url": url, "port": port, "pid": os.getpid(), "home": str(settings.home)}

    def announce() -> None:
        tmp = settings.address_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(me))
        tmp.replace(settings.address_file)
        log.info("trainyard server on %s (engine %s, home %s)", url, platform.engine.name, settings.home)

    def withdraw() -> None:
        # here, not after run(): uvicorn re-raises SIGTERM once it has shut down
        if (read_address(settings.address_file) or {}).get("pid") == os.getpid():
            settings.address_file.unlink(missing_ok=True)

    app = create_app(platform, server_url=url, on_ready=announce, on_stop=withdraw)

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
