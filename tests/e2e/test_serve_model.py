"""`trainyard serve JOB --name digits`: a trained scikit-learn model served by the built-in model server
(serve-model's `trainyard.serving.model_server`, per /tmp/serve-contract.md), reached at /serve/digits,
answering the Open Inference Protocol v2 with the model's own predictions; scaled to zero and back."""

from __future__ import annotations

import pickle

import httpx
import pytest

from tests.conftest import need_module
from tests.e2e.helpers import py_job, until

pytestmark = pytest.mark.slow
need_module("trainyard.serving.model_server", "the built-in model server (branch serve-model)")
need_module("sklearn", "pip install scikit-learn")

TRAIN = """
import os, pickle
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
x, y = load_digits(return_X_y=True)
model = LogisticRegression(max_iter=200).fit(x[:1000], y[:1000])
with open(os.path.join(os.environ["TRAINYARD_OUTPUT_DIR"], "model.pkl"), "wb") as f:
    pickle.dump(model, f)
"""


def test_serve_a_trained_job_answers_v2_infer_with_the_models_predictions(server, tmp_path):
    from sklearn.datasets import load_digits

    client = server.client()
    job = client.submit(py_job(TRAIN, name="digits-train", resources={"cpu": 1, "memory": "2Gi"}))
    assert job.wait(timeout=300).status.value == "succeeded"
    model = pickle.loads(httpx.get(f"{server.url}/api/v1/jobs/{job.id}/outputs/model.pkl",
                                   headers=server.headers, timeout=60).content)

    done = server.cli("serve", job.id, "--name", "digits", "--min", "0", "--max", "1", "--cpu", "1")
    assert done.returncode == 0, done.stderr
    assert client.services.get("digits").spec.inputs["model"].endswith(f"jobs/{job.id}/1/outputs")

    x, _ = load_digits(return_X_y=True)
    rows = x[1000:1010]
    body = {"inputs": [{"name": "input-0", "shape": list(rows.shape), "datatype": "FP64",
                        "data": rows.flatten().tolist()}]}
    r = httpx.post(f"{server.url}/serve/digits/v2/models/digits/infer", json=body, headers=server.headers,
                   timeout=180)  # a cold start: the first request waits for the replica
    assert r.status_code == 200, r.text
    assert [int(v) for v in r.json()["outputs"][0]["data"]] == model.predict(rows).tolist()
    ready = httpx.get(f"{server.url}/serve/digits/v2/health/ready", headers=server.headers, timeout=30)
    assert ready.status_code == 200
    # `serve` says how to call it: a curl line whose token comes from `trainyard token print`
    curl = done.stdout.strip().splitlines()[-1].split()
    assert curl[:3] == ["curl", "-H", '"Authorization:'] and "$(trainyard token print)" in done.stdout
    printed = server.cli("token", "print")
    assert printed.returncode == 0, printed.stderr
    meta = httpx.get(curl[-1], headers={"Authorization": f"Bearer {printed.stdout.strip()}"}, timeout=30)
    assert meta.status_code == 200 and meta.json()["name"] == "digits", meta.text
    until(lambda: client.services.get("digits").ready == 1, timeout=30)
    client.services.delete("digits")
