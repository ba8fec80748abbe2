"""A service replica answers only what came through the server (services/service_tokens.py): each replica attempt
gets a random token of its own, in its environment; /serve/ and the service's probes send it, the caller's forged one
never passes, and the built-in model server refuses a direct connection to its port without it (any process on the
node can open one), but for its health checks. The token shows nowhere else: not in the API, the CLI, a log or a
file of the server's home."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import httpx
import psutil
import pytest
from websockets.sync.client import connect as ws_connect

from tests.conftest import need_module
from tests.support.servers import ServerProcess
from trainyard.spec.serve import serve_spec

pytestmark = pytest.mark.slow
need_module("sklearn", "pip install scikit-learn")
httpclient = need_module("tritonclient.http", "pip install 'tritonclient[http]'")
APP = str(Path(__file__).resolve().parents[1] / "support" / "replica_app.py")
HEADER = "X-Trainyard-Service-Token"
INFER = "/v2/models/digits/infer"


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


def test_the_model_server_answers_a_direct_request_only_with_its_replicas_token(server, tmp_path):
    import joblib
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    x, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=200).fit(x[:1000], y[:1000])
    joblib.dump(model, tmp_path / "digits.joblib")
    client = server.client()
    client.services.apply(serve_spec(f"file://{tmp_path / 'digits.joblib'}", "digits", replicas=1, cpu=0.5,
                                     python=sys.executable))
    address = client.services.wait_ready("digits", 1, timeout=120).replicas[0].address  # its probe: health
    rows = x[1000:1004]
    body = {"inputs": [{"name": "input-0", "shape": list(rows.shape), "datatype": "FP64",
                        "data": rows.flatten().tolist()}]}
    expected = model.predict(rows).tolist()
    direct = f"http://{address}"

    # given a process on the node without the token: refused, whatever it asks but health
    refused = httpx.post(direct + INFER, json=body)
    assert refused.status_code == 403 and HEADER in refused.json()["error"]
    for path in ("/", "/v2", "/v2/models/digits", "/metrics", "/v1/models"):
        assert httpx.get(direct + path).status_code == 403, path
    assert httpx.post(direct + INFER, json=body, headers={HEADER: "A" * 43}).status_code == 403
    for path in ("/v2/health/live", "/v2/health/ready"):
        assert httpx.get(direct + path).status_code == 200, path

    # with the replica's own token (32 random bytes): answered
    token = replica_token(address)
    assert len(base64.urlsafe_b64decode(token + "=")) == 32
    answered = httpx.post(direct + INFER, json=body, headers={HEADER: token})
    assert answered.status_code == 200 and [int(v) for v in answered.json()["outputs"][0]["data"]] == expected

    # through /serve/: the server adds the token, replacing a caller's forged one, on the lane and the usual way
    url = f"{server.url}/serve/digits"
    forged = {**server.headers, HEADER: "forged"}
    for extra in ({}, {"Cookie": "a=b"}):  # a cookie sends it the usual way (api/serve_lane.py)
        through = httpx.post(url + INFER, json=body, headers={**forged, **extra}, timeout=60)
        assert through.status_code == 200, through.text
        assert [int(v) for v in through.json()["outputs"][0]["data"]] == expected
        assert HEADER.lower() not in {k.lower() for k in through.headers}
    assert httpx.get(url + "/", headers=server.headers).status_code == 200  # the try page

    # tritonclient, through /serve/
    triton = httpclient.InferenceServerClient(url=url.removeprefix("http://"))
    assert triton.is_server_ready(headers=server.headers) and triton.is_model_ready("digits", headers=server.headers)
    given = httpclient.InferInput("input-0", list(rows.shape), "FP64")
    given.set_data_from_numpy(rows)
    got = triton.infer("digits", [given], outputs=[httpclient.InferRequestedOutput("predict")],
                       headers=server.headers)
    assert got.as_numpy("predict").tolist() == expected

    # the token shows in no answer of the API or the CLI, and in no file of the server's home
    shown = client.services.get("digits")
    assert token not in shown.model_dump_json()
    job = shown.replicas[0].job_id
    assert token not in httpx.get(f"{server.url}/api/v1/jobs/{job}", headers=server.headers).text
    assert token not in httpx.get(f"{server.url}/api/v1/jobs/{job}/events", headers=server.headers).text
    assert token not in server.cli("service", "show", "digits").stdout
    nowhere_in(server.home, [token])
    client.services.delete("digits")


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
