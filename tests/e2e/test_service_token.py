"""A service replica answers only what came through the server (services/service_tokens.py): each replica attempt
gets a random token of its own, in its environment; /serve/ and the service's probes send it, the caller's forged one
never passes, and the built-in model server refuses a direct connection to its port without it (any process on the
node can open one), but for its health checks. The token shows nowhere else: not in the API, the CLI, a log or a
file of the server's home."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import psutil
import pytest
from websockets.sync.client import connect as ws_connect

from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow
APP = str(Path(__file__).resolve().parents[1] / "support" / "replica_app.py")
HEADER = "X-Trainyard-Service-Token"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("svctoken") / "home",
                        ["--cpus", "4", "--memory", "8Gi", "--container-runtime", "none"])
    srv.start()
    yield srv
    srv.stop_all()


def replica_token(address: str) -> str:
    """The token in the environment of the process listening at ``address`` (the replica: this test's user may
    read it, as the replica's owner may)."""
    port = int(address.rsplit(":", 1)[1])
    for proc in psutil.process_iter():
        try:
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in proc.net_connections("tcp")):
                return proc.environ()["TRAINYARD_SERVICE_TOKEN"]
        except psutil.Error:
            continue
    raise AssertionError(f"nothing listens at {address}")


def nowhere_in(home: Path, tokens: list[str]) -> None:
    """No file of the server's home (database, launch.json, logs, events) holds a token in the clear."""
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert not any(t.encode() in data for t in tokens), f"a service token in {path}"


def test_a_users_service_reads_its_token_and_every_request_of_the_server_carries_it(server):
    client = server.client()
    # its /healthz too refuses a request without the token: ready only because the probes send it
    client.services.apply({"name": "guarded", "command": [sys.executable, APP], "resources": {"cpu": 0.5},
                           "env_vars": {"CHECK_TOKEN": "1"},
                           "service": {"replicas": 2, "readiness": {"path": "/healthz", "period": "0.2s"}}})
    info = client.services.wait_ready("guarded", 2, timeout=90)
    tokens = {r.address: replica_token(r.address) for r in info.replicas}
    assert len(set(tokens.values())) == 2  # each replica's attempt has its own
    for address in tokens:
        assert httpx.get(f"http://{address}/whoami").status_code == 403

    url = f"{server.url}/serve/guarded"
    seen_by = {}
    for extra in ({}, {"Cookie": "a=b"}) * 4:  # the lane and the usual way, over both replicas
        r = httpx.get(url + "/whoami", headers={**server.headers, HEADER: "forged", **extra})
        assert r.status_code == 200, r.text  # the replica reads the first such header: the forged one never came
        got = {k.lower(): v for k, v in r.json()["headers"].items()}
        seen_by[r.json()["pid"]] = got[HEADER.lower()]
    assert set(seen_by.values()) == set(tokens.values())
    posted = httpx.post(url + "/echo", headers=server.headers, content=(b"x" * 1000 for _ in range(3)))  # chunked
    assert posted.status_code == 200 and len(posted.json()["body"]) == 3000

    ws_url = url.replace("http://", "ws://") + "/ws"
    with ws_connect(ws_url, additional_headers={**server.headers, HEADER: "forged"}, open_timeout=30) as ws:
        ws.send("hello")
        assert ws.recv(timeout=10) == "hello"

    assert not any(t in server.cli("service", "show", "guarded").stdout for t in tokens.values())
    for r in info.replicas:
        log = server.cli("logs", r.job_id).stdout
        assert not any(t in log for t in tokens.values())
    nowhere_in(server.home, list(tokens.values()))
    client.services.delete("guarded")
