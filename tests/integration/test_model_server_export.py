"""A ``torch.export`` program (``.pt2``) served by the built-in model server, spoken to by tritonclient.

TorchScript is deprecated in torch 2.13 in favour of ``torch.export``: the server reads the program's own
signature (several inputs, a keyword-only one, a dynamic batch, a dict of outputs) and answers as the
program does.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from tests.conftest import need_module
from tests.support.model_server import ModelServer, export_scorer

pytestmark = pytest.mark.slow
httpclient = need_module("tritonclient.http", "pip install 'tritonclient[http]'")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch = need_module("torch", "pip install 'trainyard[torch]'")
    path = tmp_path_factory.mktemp("exported") / "scorer.pt2"
    net = export_scorer(torch, path)
    server = ModelServer(path, "scorer").start().wait()
    yield torch, net, server
    server.stop()


def test_tritonclient_reads_the_programs_signature_and_infer_equals_the_module(exported):
    torch, net, server = exported
    client = httpclient.InferenceServerClient(url=server.address)
    meta = client.get_model_metadata("scorer")
    assert meta["platform"] == "pytorch_export"
    assert meta["inputs"] == [{"name": "input-0", "datatype": "FP32", "shape": [-1, 4]},
                              {"name": "input-1", "datatype": "BOOL", "shape": [-1, 3]},
                              {"name": "input-2", "datatype": "FP32", "shape": []}]
    assert meta["outputs"] == [{"name": "output-0", "datatype": "FP32", "shape": [-1, 3]},
                               {"name": "output-1", "datatype": "INT64", "shape": [-1]}]
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 4)).astype(np.float32)
    mask = rng.random((5, 3)) > 0.3
    mask[:, 0] = True
    given = [httpclient.InferInput("input-0", [5, 4], "FP32"), httpclient.InferInput("input-1", [5, 3], "BOOL"),
             httpclient.InferInput("input-2", [], "FP32")]
    for tensor, value in zip(given, [x, mask, np.array(0.5, dtype=np.float32)]):
        tensor.set_data_from_numpy(value)
    result = client.infer("scorer", given)
    with torch.no_grad():
        want = net(torch.from_numpy(x), torch.from_numpy(mask), temperature=torch.tensor(0.5))
    np.testing.assert_allclose(result.as_numpy("output-0"), want["proba"].numpy(), rtol=1e-5)
    np.testing.assert_array_equal(result.as_numpy("output-1"), want["label"].numpy())


@pytest.mark.parametrize(("inputs", "message"), [
    ([("input-0", [2, 5], "FP32"), ("input-1", [2, 3], "BOOL"), ("input-2", [], "FP32")],
     "inputs[0].shape: the model takes 4 features per row, got 5"),
    ([("input-0", [2, 4], "FP32"), ("input-2", [], "FP32")], "inputs: missing input-1"),
    ([("input-0", [2, 4], "BYTES"), ("input-1", [2, 3], "BOOL"), ("input-2", [], "FP32")],
     "inputs[0].datatype: the model takes FP32 numbers, not BYTES"),
])
def test_a_body_that_does_not_fit_the_signature_gets_400_naming_the_field(exported, inputs, message):
    _, _, server = exported
    one = {"BYTES": "a", "BOOL": True, "FP32": 1}
    body = {"inputs": [{"name": n, "shape": s, "datatype": d, "data": [one[d]] * int(np.prod(s))}
                       for n, s, d in inputs]}
    r = httpx.post(f"{server.url}/v2/models/scorer/infer", json=body)
    assert r.status_code == 400 and message in r.json()["error"], r.text


def test_kserve_v1_names_the_inputs_a_multi_input_model_needs(exported):
    _, _, server = exported
    r = httpx.post(f"{server.url}/v1/models/scorer:predict", json={"instances": [[0, 0, 0, 0]]})
    assert r.status_code == 400
    assert r.json()["error"] == ("instances: this model takes 3 inputs (input-0, input-1, input-2): send them by "
                                 "name to /v2/models/scorer/infer")
