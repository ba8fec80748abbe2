"""The built-in model server as a real process, spoken to by a client no one here wrote (tritonclient).

Given models trained here (scikit-learn digits, a TorchScript module, a text pipeline, a native
XGBoost booster), the server answers the Open Inference Protocol v2 and KServe v1 exactly as the
model's own ``predict`` does, refuses bad bodies with 400 naming the field, and is ready only once
the model is loaded.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import httpx
import numpy as np
import pytest

from tests.conftest import need_module
from tests.support.model_server import ModelServer

pytestmark = pytest.mark.slow
httpclient = need_module("tritonclient.http", "pip install 'tritonclient[http]'")


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """A LogisticRegression on scikit-learn's digits, joblib-dumped and served as `digits`."""
    import joblib
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    x, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=300).fit(x[:1200], y[:1200])
    path = tmp_path_factory.mktemp("digits") / "digits.joblib"
    joblib.dump(model, path)
    server = ModelServer(path, "digits").start().wait()
    yield server, model, x[1200:1300]
    server.stop()


def test_tritonclient_sees_a_live_ready_server_and_the_models_signature(digits):
    server, _, _ = digits
    client = httpclient.InferenceServerClient(url=server.address)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("digits") and not client.is_model_ready("other")
    meta = client.get_model_metadata("digits")
    assert meta["name"] == "digits" and meta["versions"] == ["1"] and meta["platform"] == "sklearn"
    assert meta["inputs"] == [{"name": "input-0", "datatype": "FP64", "shape": [-1, 64]}]
    assert meta["outputs"] == [{"name": "predict", "datatype": "INT64", "shape": [-1]},
                               {"name": "predict_proba", "datatype": "FP64", "shape": [-1, 10]}]
    assert client.get_server_metadata()["name"] == "trainyard-model-server"


@pytest.mark.parametrize("binary", [True, False], ids=["binary-tensors", "json-tensors"])
def test_tritonclient_infer_equals_the_models_own_predict(digits, binary):
    server, model, rows = digits
    client = httpclient.InferenceServerClient(url=server.address)
    given = httpclient.InferInput("input-0", list(rows.shape), "FP32")
    given.set_data_from_numpy(rows.astype(np.float32), binary_data=binary)
    asked = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("predict", "predict_proba")]
    result = client.infer("digits", [given], outputs=asked, request_id="r-1")
    assert result.get_response()["id"] == "r-1"
    assert result.as_numpy("predict").tolist() == model.predict(rows.astype(np.float32)).tolist()
    np.testing.assert_allclose(result.as_numpy("predict_proba"), model.predict_proba(rows.astype(np.float32)),
                               rtol=1e-6)


def test_only_the_requested_output_comes_back(digits):
    server, model, rows = digits
    body = {"inputs": [{"name": "input-0", "shape": [2, 64], "datatype": "INT64",
                        "data": rows[:2].astype(int).tolist()}],  # nested data, ints for an FP64 input
            "outputs": [{"name": "predict"}]}
    r = httpx.post(f"{server.url}/v2/models/digits/infer", json=body)
    assert r.status_code == 200, r.text
    assert [o["name"] for o in r.json()["outputs"]] == ["predict"]
    assert r.json()["outputs"][0]["data"] == model.predict(rows[:2].astype(int)).tolist()


def test_the_kserve_v1_alias_answers_the_same(digits):
    server, model, rows = digits
    r = httpx.post(f"{server.url}/v1/models/digits:predict", json={"instances": rows[:5].tolist()})
    assert r.status_code == 200, r.text
    assert r.json() == {"predictions": model.predict(rows[:5]).tolist()}
    assert httpx.get(f"{server.url}/v1/models/digits").json() == {"name": "digits", "ready": True}


ROW = [0.0] * 64


@pytest.mark.parametrize(("body", "field"), [
    ({}, "inputs: required"),
    ({"inputs": []}, "inputs: a non-empty list"),
    ({"inputs": [{"shape": [1, 64], "datatype": "FP64", "data": ROW}]}, "inputs[0].name"),
    ({"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP64", "data": ROW}]}, "inputs[0].name"),
    ({"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FLOAT", "data": ROW}]}, "inputs[0].datatype"),
    ({"inputs": [{"name": "input-0", "shape": "1x64", "datatype": "FP64", "data": ROW}]}, "inputs[0].shape"),
    ({"inputs": [{"name": "input-0", "shape": [2, 64], "datatype": "FP64", "data": ROW}]}, "inputs[0].data"),
    ({"inputs": [{"name": "input-0", "shape": [1, 10], "datatype": "FP64", "data": ROW[:10]}]},
     "inputs[0].shape: the model takes 64 features per row, got 10"),
    ({"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FP64", "data": ["a"] * 64}]}, "inputs[0].data"),
    ({"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FP64", "data": [float("nan")] * 64}]},
     "inputs[0].data: NaN or infinite"),
    ({"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FP64"}]}, "inputs[0].data: required"),
    ({"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "BYTES", "data": ["a"] * 64}]},
     "inputs[0].datatype: the model takes FP64"),
    ({"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FP64", "data": ROW}],
      "outputs": [{"name": "logits"}]}, "outputs[0].name: the model has no output 'logits'"),
    ({"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "INT8", "data": [300] * 64}]},
     "inputs[0].data: a value outside INT8"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_malformed_infer_body_gets_400_naming_the_field(digits, body, field):
    server, _, _ = digits
    r = httpx.post(f"{server.url}/v2/models/digits/infer", content=json.dumps(body))  # NaN as JSON's NaN token
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]


def test_bodies_that_are_not_even_json_and_bad_binary_headers_get_400(digits):
    server, _, _ = digits
    r = httpx.post(f"{server.url}/v2/models/digits/infer", content=b"{not json")
    assert r.status_code == 400 and r.json()["error"].startswith("body: not JSON")
    r = httpx.post(f"{server.url}/v2/models/digits/infer", content=b"[]")
    assert r.status_code == 400 and "body:" in r.json()["error"]
    r = httpx.post(f"{server.url}/v2/models/digits/infer", content=b"{}",
                   headers={"Inference-Header-Content-Length": "99"})
    assert r.status_code == 400 and "Inference-Header-Content-Length" in r.json()["error"]
    r = httpx.post(f"{server.url}/v1/models/digits:predict", json={"rows": []})
    assert r.status_code == 400 and r.json()["error"].startswith("instances:")


def test_a_body_over_64_mib_is_refused_with_or_without_a_length_and_a_huge_head_gets_431(digits):
    server, _, _ = digits
    url = f"{server.url}/v2/models/digits/infer"
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as conn:  # the head alone: refused before the body
        conn.sendall(f"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {64 * 1024 * 1024 + 1}"
                     "\r\n\r\n".encode())
        assert conn.recv(65536).startswith(b"HTTP/1.1 413 ")
    # sent chunked, it is refused once past the bound (a body read whole first would hold all 80 MiB)
    r = httpx.post(url, content=iter([b" " * (1 << 20)] * 80), timeout=60)
    assert r.status_code == 413 and "more than" in r.json()["error"]
    r = httpx.get(f"{server.url}/v2/health/ready", headers={"X-A": "a" * 70_000})
    assert r.status_code == 431
    assert httpx.get(f"{server.url}/v2/health/ready").status_code == 200


def test_an_unknown_model_or_version_is_404_with_an_error_body(digits):
    server, _, _ = digits
    r = httpx.post(f"{server.url}/v2/models/nope/infer", json={"inputs": []})
    assert r.status_code == 404 and "'nope' is not served here" in r.json()["error"]
    assert httpx.get(f"{server.url}/v2/models/digits/versions/7").status_code == 404
    assert httpx.get(f"{server.url}/v2/models/digits/versions/1").json()["name"] == "digits"


def test_metrics_count_requests_errors_and_latency_per_model(digits):
    server, _, _ = digits
    from prometheus_client.parser import text_string_to_metric_families

    def samples() -> dict:
        text = httpx.get(f"{server.url}/metrics").text
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text) for s in f.samples}

    before = samples()
    httpx.post(f"{server.url}/v2/models/digits/infer", json={})
    httpx.post(f"{server.url}/v2/models/digits/infer",
               json={"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FP64", "data": ROW}]})
    after = samples()
    labels = (("model", "digits"), ("protocol", "v2"))
    grew = lambda key: after.get(key, 0) - before.get(key, 0)  # noqa: E731
    assert grew(("trainyard_model_requests_total", labels)) == 2
    assert grew(("trainyard_model_request_errors_total", (("code", "400"), *labels))) == 1
    assert grew(("trainyard_model_request_duration_seconds_count", labels)) == 2


def test_the_try_page_is_served_at_the_root_and_fetches_by_relative_urls_only(digits):
    server, _, _ = digits
    r = httpx.get(server.url + "/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert 'const MODEL = "digits";' in r.text
    # behind the proxy the page lives at /serve/NAME/: an absolute path would miss the prefix
    for absolute in ('"/v2', "'/v2", '"/v1', "`/v", 'fetch("/'):
        assert absolute not in r.text, absolute


@pytest.fixture
def torchscript_model(tmp_path):
    torch = need_module("torch", "pip install 'trainyard[torch]'")

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.linear = torch.nn.Linear(4, 3)
            self.example_input = torch.zeros(1, 4)  # kept by TorchScript: the server reads the signature

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(self.linear(x))

    net = torch.jit.script(Net().eval())
    path = tmp_path / "net.pt"
    torch.jit.save(net, str(path))
    return torch, net, path


def test_a_torchscript_model_answers_as_the_module_does(torchscript_model):
    torch, net, path = torchscript_model
    server = ModelServer(path, "net").start()
    try:
        server.wait()
        client = httpclient.InferenceServerClient(url=server.address)
        meta = client.get_model_metadata("net")
        assert meta["platform"] == "pytorch_torchscript"
        assert meta["inputs"] == [{"name": "input-0", "datatype": "FP32", "shape": [-1, 4]}]
        assert meta["outputs"] == [{"name": "output-0", "datatype": "FP32", "shape": [-1, 3]}]
        x = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
        given = httpclient.InferInput("input-0", [5, 4], "FP32")
        given.set_data_from_numpy(x)
        out = client.infer("net", [given]).as_numpy("output-0")
        np.testing.assert_allclose(out, net(torch.from_numpy(x)).detach().numpy(), rtol=1e-6)
        r = httpx.post(f"{server.url}/v2/models/net/infer",
                       json={"inputs": [{"name": "input-0", "shape": [1, 5], "datatype": "FP32", "data": [0] * 5}]})
        assert r.status_code == 400 and "inputs[0].shape: the model takes 4 features per row, got 5" in r.text
    finally:
        server.stop()


def test_a_text_pipeline_takes_strings_as_bytes(tmp_path):
    import joblib
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    texts = ["great film", "loved it", "wonderful acting", "awful film", "hated it", "terrible acting"] * 3
    model = make_pipeline(TfidfVectorizer(), LogisticRegression()).fit(texts, ["pos", "pos", "pos", "neg", "neg",
                                                                               "neg"] * 3)
    joblib.dump(model, tmp_path / "text.pkl")
    server = ModelServer(tmp_path / "text.pkl", "reviews").start()
    try:
        server.wait()
        client = httpclient.InferenceServerClient(url=server.address)
        assert client.get_model_metadata("reviews")["inputs"][0] == {"name": "input-0", "datatype": "BYTES",
                                                                     "shape": [-1]}
        asked = ["a great, wonderful film", "awful and terrible", "héllo"]
        given = httpclient.InferInput("input-0", [3], "BYTES")
        given.set_data_from_numpy(np.array(asked, dtype=object))
        labels = client.infer("reviews", [given]).as_numpy("predict")
        assert [v.decode() for v in labels] == model.predict(asked).tolist()
        r = httpx.post(f"{server.url}/v1/models/reviews:predict", json={"instances": asked})
        assert r.json() == {"predictions": model.predict(asked).tolist()}
    finally:
        server.stop()


def test_a_native_xgboost_model_answers_as_xgboost_does(tmp_path):
    xgboost = need_module("xgboost", "pip install xgboost-cpu")
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    model = xgboost.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1).fit(x, y)
    model.save_model(tmp_path / "cancer.json")
    server = ModelServer(tmp_path / "cancer.json", "cancer").start()
    try:
        server.wait()
        meta = httpx.get(f"{server.url}/v2/models/cancer").json()
        assert meta["platform"] == "xgboost" and meta["inputs"][0]["shape"] == [-1, 30]
        rows = x[:20].copy()
        rows[0, 3] = np.nan  # XGBoost reads NaN as missing: allowed
        body = {"inputs": [{"name": "input-0", "shape": [20, 30], "datatype": "FP64", "data": rows.ravel().tolist()}]}
        r = httpx.post(f"{server.url}/v2/models/cancer/infer", content=json.dumps(body))
        assert r.status_code == 200, r.text
        out = {o["name"]: o["data"] for o in r.json()["outputs"]}
        assert out["predict"] == model.predict(rows).tolist()
        np.testing.assert_allclose(np.reshape(out["predict_proba"], (20, 2)), model.predict_proba(rows), rtol=1e-5)
    finally:
        server.stop()


def test_an_xgboost_model_without_xgboost_installed_fails_naming_the_format(tmp_path):
    (tmp_path / "model.json").write_text('{"learner": {}, "version": [2, 1, 0]}')
    blocker = tmp_path / "blocker"
    (blocker / "xgboost").mkdir(parents=True)
    (blocker / "xgboost" / "__init__.py").write_text("raise ImportError('no xgboost here')\n")
    server = ModelServer(tmp_path / "model.json", "m", env={"PYTHONPATH": str(blocker)}).start()
    assert server.proc.wait(60) == 1
    assert "an XGBoost model (native JSON/UBJ format): serving it needs the xgboost package" in server.output()


def test_not_ready_until_the_model_is_loaded(tmp_path):
    torch = need_module("torch", "pip install 'trainyard[torch]'")
    torch.save({"linear.weight": torch.ones(1, 2), "linear.bias": torch.zeros(1)}, tmp_path / "gated.pt")
    gate = tmp_path / "gate"
    server = ModelServer(tmp_path / "gated.pt", "slow", "--module", "tests.support.gated_model:Gated",
                         env={"TRAINYARD_TEST_GATE": str(gate)}).start()
    try:
        server.wait("/v2/health/live")
        client = httpclient.InferenceServerClient(url=server.address)
        assert client.is_server_live() and not client.is_server_ready() and not client.is_model_ready("slow")
        r = httpx.post(f"{server.url}/v2/models/slow/infer",
                       json={"inputs": [{"name": "input-0", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]})
        assert r.status_code == 503 and "still loading" in r.json()["error"]
        gate.touch()
        server.wait()
        assert client.is_model_ready("slow")
        given = httpclient.InferInput("input-0", [1, 2], "FP32")
        given.set_data_from_numpy(np.array([[1, 2]], dtype=np.float32))
        assert client.infer("slow", [given]).as_numpy("output-0").tolist() == [[3.0]]
    finally:
        server.stop()


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "/no/such/model.pkl"], "--model: /no/such/model.pkl does not exist"),
    (["--format", "onnx"], "--format"),
    (["--name", "a/b"], "--name"),
])
def test_bad_arguments_fail_before_listening(tmp_path, args, message):
    model = tmp_path / "m.pkl"
    model.write_bytes(b"\x80\x04N.")
    base = {"--model": str(model), "--name": "m", "--port": "1"}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    done = subprocess.run([sys.executable, "-m", "trainyard.serving.model_server",
                           *[w for kv in base.items() for w in kv]], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr


def test_a_state_dict_without_module_is_refused_with_the_fix(tmp_path):
    torch = need_module("torch", "pip install 'trainyard[torch]'")
    torch.save({"w": torch.ones(1)}, tmp_path / "weights.pt")
    done = subprocess.run([sys.executable, "-m", "trainyard.serving.model_server", "--model", str(tmp_path),
                           "--name", "w", "--port", "1"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "give --module pkg.mod:Factory" in done.stderr
