"""Which file of a model path is served, and as what: decided before the server listens."""

from __future__ import annotations

import pickle

import pytest

from tests.conftest import need_module
from trainyard.serving.model_server.loaders import ModelError, resolve


def test_a_jobs_output_folder_serves_its_model_not_its_metrics(tmp_path):
    (tmp_path / "model.pkl").write_bytes(pickle.dumps({"a": 1}))
    (tmp_path / "metrics.json").write_text('{"accuracy": 0.97}')
    source = resolve(tmp_path)
    assert source.path == tmp_path / "model.pkl" and source.format == "sklearn"


def test_a_folder_with_two_models_asks_for_the_file(tmp_path):
    (tmp_path / "a.joblib").write_bytes(b"\x80\x04N.")
    (tmp_path / "b.pkl").write_bytes(b"\x80\x04N.")
    with pytest.raises(ModelError, match="holds several files .*name the model file itself"):
        resolve(tmp_path)


def test_content_decides_when_the_name_does_not(tmp_path):
    torch = need_module("torch", "pip install 'trainyard[torch]'")
    (tmp_path / "booster").write_text('{"learner": {}, "version": [3, 0, 0]}')
    (tmp_path / "pickled").write_bytes(pickle.dumps([1]))
    torch.save({"w": torch.ones(1)}, tmp_path / "weights")
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 1)), str(tmp_path / "scripted"))
    assert resolve(tmp_path / "booster").format == "xgboost"
    assert resolve(tmp_path / "pickled").format == "sklearn"
    assert resolve(tmp_path / "scripted").format == "torchscript"
    assert resolve(tmp_path / "weights", module="pkg.mod:Net").format == "torch-state-dict"
    with pytest.raises(ModelError, match="a PyTorch state dict .* give --module"):
        resolve(tmp_path / "weights")


def test_a_torch_export_archive_is_told_from_torchscript_by_its_content(tmp_path):
    torch = need_module("torch", "pip install 'trainyard[torch]'")
    program = torch.export.export(torch.nn.Linear(2, 1), (torch.zeros(1, 2),))
    torch.export.save(program, tmp_path / "exported")  # no extension: the archive's own entries decide
    torch.export.save(program, tmp_path / "model.pt2")
    assert resolve(tmp_path / "exported").format == "torch-export"
    assert resolve(tmp_path / "model.pt2").format == "torch-export"
    assert resolve(tmp_path / "exported", "torchscript").format == "torchscript"  # --format wins


@pytest.mark.parametrize(("content", "kwargs", "message"), [
    (b"hello", {}, "cannot tell what"),
    (b"\x80\x04N.", {"fmt": "onnx"}, "--format: 'onnx'"),
    (b"\x80\x04N.", {"module": "no_colon"}, "--module: 'no_colon' is not pkg.mod:Factory"),
])
def test_what_cannot_be_served_is_refused_with_the_reason(tmp_path, content, kwargs, message):
    (tmp_path / "m.bin").write_bytes(content)
    with pytest.raises(ModelError, match=message):
        resolve(tmp_path / "m.bin", **kwargs)
