"""A pipeline that trains a scikit-learn model and serves it: the ``serve`` step applies the built-in model
server over the train step's output and is done once a replica is ready; /serve/NAME then answers with the
model's own predictions. A second run with a bad model fails the step with the service's reason."""

from __future__ import annotations

import pickle

import httpx
import pytest

from tests.conftest import need_module

pytestmark = pytest.mark.slow
need_module("sklearn", "pip install scikit-learn")

TRAIN = """\
import os, pickle, sys
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
x, y = load_digits(return_X_y=True)
os.makedirs(sys.argv[1])
with open(os.path.join(sys.argv[1], "model.pkl"), "wb") as f:
    pickle.dump(LogisticRegression(max_iter=200).fit(x[:1000], y[:1000]), f)
"""

PIPELINE = """\
name: train-and-serve
steps:
  train:
    command: python train.py {{outputs.model}}
    outputs: [model]
    resources: {cpu: 1, memory: 1Gi}
  deploy:
    serve:
      model: "{{steps.train.outputs.model}}/model.pkl"
      name: digits
      resources: {cpu: 1}
      timeout: 2m
"""


def test_a_pipeline_trains_then_serves_and_the_service_answers_with_the_models_predictions(server, tmp_path):
    from sklearn.datasets import load_digits

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(TRAIN)
    (code / "p.yaml").write_text(PIPELINE)
    # a model file the server cannot load (written now: the same code snapshot lets the train step be cached)
    (code / "bad.yaml").write_text(PIPELINE.replace("name: digits", "name: broken").replace("timeout: 2m", "timeout: 3s")
                                   .replace("/model.pkl", "/missing.pkl"))
    client = server.client()
    run = client.pipelines.run(code / "p.yaml").wait(timeout=240)
    assert run.status.value == "succeeded", run.reason
    deploy = run.step("deploy")
    assert deploy.status == "succeeded" and "service digits version 1 ready at /serve/digits/" in deploy.reason
    train = run.step("train")
    assert deploy.inputs["model"]["url"].endswith(f"jobs/{train.job_id}/1/outputs/model/model.pkl")

    model = pickle.loads(httpx.get(f"{server.url}/api/v1/jobs/{train.job_id}/outputs/model/model.pkl",
                                   headers=server.headers, timeout=30).content)
    rows = load_digits(return_X_y=True)[0][1000:1010]
    body = {"inputs": [{"name": "input-0", "shape": list(rows.shape), "datatype": "FP64",
                        "data": rows.flatten().tolist()}]}
    r = httpx.post(f"{server.url}/serve/digits/v2/models/digits/infer", json=body, headers=server.headers, timeout=60)
    assert r.status_code == 200, r.text
    assert [int(v) for v in r.json()["outputs"][0]["data"]] == model.predict(rows).tolist()

    # the bad model: the step waits its timeout, then fails naming the service's state
    bad = client.pipelines.run(code / "bad.yaml").wait(timeout=120)
    assert bad.status.value == "failed" and bad.step("train").status == "cached"
    assert "no ready replica of version 1 within 3s" in bad.step("deploy").reason, bad.step("deploy").reason
    client.services.delete("digits")
    client.services.delete("broken")
