"""A real server for the ``/serve/`` lane's tests: uvicorn in a thread with the protocol ``trainyard server`` runs,
and one service, ``echo``, whose replica is a real process (tests/support/replica_app.py)."""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import httpx
import pytest
import uvicorn

from tests.support.waiting import until
from trainyard.api.app import create_app
from trainyard.api.serve_lane import lane_protocol
from trainyard.config import ServerSettings
from trainyard.sdk.client import Client
from trainyard.services import serving
from trainyard.services.platform import Platform

APP = str(Path(__file__).resolve().parent / "replica_app.py")
TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from _serve(tmp_path_factory, auth=False)


@pytest.fixture(scope="module")
def served_with_users(tmp_path_factory):
    """The same on a server with users (``--auth``; TOKEN is its local admin)."""
    yield from _serve(tmp_path_factory, auth=True)


def _serve(tmp_path_factory, auth: bool):  # noqa: ANN001, ANN202
    # a route cached for the module: what takes the lane must not hang on how long a loaded machine takes
    # between a test's requests (the 0.5 s default sends the first request after it the usual way)
    fresh = pytest.MonkeyPatch()
    fresh.setattr(serving, "ROUTE_TTL", 60.0)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings = ServerSettings(home=tmp_path_factory.mktemp("lane") / "home", token=TOKEN, cpus=4,
                              memory=8 * 2**30, container_runtime="none", auth=auth)
    platform = Platform(settings)
    app = create_app(platform, url, allowed_hosts=("127.0.0.1",))
    server = uvicorn.Server(uvicorn.Config(app, http=lane_protocol(app.lane), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    until(lambda: server.started, timeout=30)
    client = Client(url, token=TOKEN)
    client.services.apply({"name": "echo", "command": [sys.executable, APP], "resources": {"cpu": 0.5},
                           "service": {"replicas": 1, "readiness": {"path": "/healthz", "period": "0.2s"}}})
    client.services.wait_ready("echo", 1, timeout=60)
    yield url, app.lane, platform, server
    client.services.delete("echo")
    # the replica's launcher reports its end before the server stops; else it waits on for a server to come back
    until(lambda: not any(s.replicas for s in client.services.list()), timeout=30)
    server.should_exit = True
    thread.join(30)
    fresh.undo()


def warm(url: str) -> None:
    """A request the usual way first: it caches the service's route, which the lane needs."""
    assert httpx.get(url + "/serve/echo/whoami", headers={**AUTH, "Cookie": "a=b"}).status_code == 200
