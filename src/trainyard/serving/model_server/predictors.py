"""What the server asks of a loaded model: its signature (inputs, outputs) and a predict on numpy arrays.

Two kinds cover every format the loaders read:

- :class:`EstimatorPredictor`: anything with scikit-learn's ``predict`` (and ``predict_proba``):
  estimators and pipelines, XGBoost, and Python wrappers such as the IMDB example's text
  classifier. Outputs ``predict`` (labels for a classifier) and ``predict_proba``.
- :class:`TorchPredictor`: a ``torch.nn.Module`` (TorchScript or eager): tensors in, tensors out
  (``output-0``, ``output-1`` … for a tuple); :class:`ExportedPredictor`, a ``torch.export`` program,
  whose inputs (``input-0`` …) and outputs are its own signature's.

Each checks what arrives against its signature and raises ``BadRequest`` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainyard.serving.model_server.protocol import BadRequest, Tensor, datatype_of

ANY = -1  # a dimension of any size (the protocol's -1)


@dataclass(frozen=True, slots=True)
class TensorSpec:
    name: str
    datatype: str
    shape: tuple[int, ...] | None  # None: any rank (a TorchScript model without an example input)

    def as_json(self) -> dict:
        shape = [ANY] if self.shape is None else list(self.shape)  # () is a scalar
        return {"name": self.name, "datatype": self.datatype, "shape": shape}


@dataclass
class Predictor:
    platform: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    parameters: dict[str, Any] = field(default_factory=dict)  # feature_names, classes: for the try page
    allow_nan: bool = False

    def predict(self, inputs: dict[str, np.ndarray], wanted: set[str]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def check(self, tensors: list[Tensor]) -> dict[str, np.ndarray]:
        """The arrays by input name, cast to what the model takes; BadRequest naming the field if not."""
        specs = {s.name: s for s in self.inputs}
        given = {t.name for t in tensors}
        for i, t in enumerate(tensors):
            if t.name not in specs:
                raise BadRequest(f"inputs[{i}].name: the model has no input {t.name!r} "
                                 f"(its inputs: {', '.join(specs)})")
        missing = [n for n in specs if n not in given]
        if missing:
            raise BadRequest(f"inputs: missing {', '.join(missing)}")
        return {t.name: self._cast(t, specs[t.name], f"inputs[{i}]") for i, t in enumerate(tensors)}

    def _cast(self, t: Tensor, spec: TensorSpec, where: str) -> np.ndarray:
        arr = t.array
        if spec.datatype == "BYTES":
            if t.datatype != "BYTES":
                raise BadRequest(f"{where}.datatype: the model takes BYTES (text), not {t.datatype}")
            try:
                arr = np.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in arr.ravel()],
                               dtype=object).reshape(arr.shape)
            except UnicodeDecodeError:
                raise BadRequest(f"{where}.data: BYTES values must be UTF-8 text") from None
        elif t.datatype == "BYTES":
            raise BadRequest(f"{where}.datatype: the model takes {spec.datatype} numbers, not BYTES")
        if spec.shape is not None:
            if arr.ndim == len(spec.shape) - 1 and arr.ndim >= 1 and spec.shape[0] == ANY:
                arr = arr[np.newaxis]  # one row without the batch dimension
            if arr.ndim != len(spec.shape):
                raise BadRequest(f"{where}.shape: {list(t.array.shape)} has {t.array.ndim} dimensions, the model "
                                 f"takes {len(spec.shape)} ({list(spec.shape)})")
            for axis, (want, got) in enumerate(zip(spec.shape, arr.shape)):
                if want != ANY and want != got:
                    what = "features per row" if axis == 1 and len(spec.shape) == 2 else f"in dimension {axis}"
                    raise BadRequest(f"{where}.shape: the model takes {want} {what}, got {got}")
        if spec.datatype != "BYTES":
            if spec.shape is not None:  # an unknown signature takes the datatype sent (token ids stay ints)
                arr = arr.astype(np.dtype(_NUMPY[spec.datatype]), copy=False)
            if arr.dtype.kind == "f" and not self.allow_nan and not np.isfinite(arr).all():
                raise BadRequest(f"{where}.data: NaN or infinite values, which this model does not accept")
        return arr


_NUMPY = {"BOOL": "bool", "INT8": "i1", "INT16": "i2", "INT32": "i4", "INT64": "i8", "UINT8": "u1",
          "UINT16": "u2", "UINT32": "u4", "UINT64": "u8", "FP16": "f2", "FP32": "f4", "FP64": "f8"}


class EstimatorPredictor(Predictor):
    """scikit-learn's interface: ``predict(X)``, and ``predict_proba(X)`` with ``classes_`` for a classifier.

    Text models (a Pipeline starting with a text vectorizer, or an object whose ``input_datatype``
    is ``"BYTES"``) take one string per row; tabular models an [N, n_features] matrix.
    """

    def __init__(self, model: Any, platform: str) -> None:
        self.model = model
        text = getattr(model, "input_datatype", None) == "BYTES" or _starts_with_vectorizer(model)
        n_features = getattr(model, "n_features_in_", None)
        if text:
            inputs = [TensorSpec("input-0", "BYTES", (ANY,))]
        else:
            inputs = [TensorSpec("input-0", "FP64", (ANY, int(n_features) if n_features else ANY))]
        classes = getattr(model, "classes_", None)
        parameters: dict[str, Any] = {}
        names = getattr(model, "feature_names_in_", None)
        if names is not None and not text:
            parameters["feature_names"] = [str(n) for n in names]
        outputs = [TensorSpec("predict", "FP64", (ANY,))]
        self.classes = None if classes is None else np.asarray(classes)
        if self.classes is not None:
            parameters["classes"] = self.classes.tolist() if self.classes.dtype.kind in "iubf" \
                else [str(c) for c in self.classes]
            outputs = [TensorSpec("predict", datatype_of(self.classes.dtype), (ANY,))]
            if hasattr(model, "predict_proba"):
                outputs.append(TensorSpec("predict_proba", "FP64", (ANY, len(self.classes))))
        super().__init__(platform, inputs, outputs, parameters, allow_nan=_allows_nan(model))

    def predict(self, inputs: dict[str, np.ndarray], wanted: set[str]) -> dict[str, np.ndarray]:
        x = inputs["input-0"]
        if self.inputs[0].datatype == "BYTES":
            x = [str(v) for v in x.ravel()]
        out: dict[str, np.ndarray] = {}
        proba = None
        if "predict_proba" in wanted:
            proba = np.asarray(self.model.predict_proba(x), dtype=np.float64)
            out["predict_proba"] = proba
        if "predict" in wanted:
            if proba is not None and self.classes is not None and proba.ndim == 2:
                labels = self.classes[proba.argmax(axis=1)]  # one pass through the model, not two
            else:
                labels = np.asarray(self.model.predict(x))
            out["predict"] = labels.astype(object) if labels.dtype.kind in "US" else labels
        return out


def _starts_with_vectorizer(model: Any) -> bool:
    first = model.steps[0][1] if hasattr(model, "steps") and model.steps else model
    return hasattr(first, "build_analyzer")  # CountVectorizer, TfidfVectorizer, HashingVectorizer


def _allows_nan(model: Any) -> bool:
    """The model's own word (scikit-learn's tags: HistGradientBoosting takes NaN as missing; XGBoost too)."""
    if getattr(model, "allow_nan", None) is not None:
        return bool(model.allow_nan)
    try:
        return bool(model.__sklearn_tags__().input_tags.allow_nan)
    except Exception:  # noqa: BLE001 - not a scikit-learn >= 1.6 estimator; older tags, or none
        try:
            return bool(model._get_tags().get("allow_nan", False))
        except Exception:  # noqa: BLE001
            return False


class TorchPredictor(Predictor):
    """A module called on tensors. With an example input the signature is known (its dtype, and every
    dimension after the batch one); without, any shape of the declared datatype is passed through."""

    def __init__(self, module: Any, platform: str, example: Any = None) -> None:
        import torch

        # a replica given a GPU sees exactly it (CUDA_VISIBLE_DEVICES), so "cuda" is that GPU
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.module, self.torch = module.to(self.device), torch
        if example is None:
            inputs = [TensorSpec("input-0", "FP32", None)]
            outputs = [TensorSpec("output-0", "FP32", None)]
        else:
            example = torch.as_tensor(example).to(self.device)
            inputs = [TensorSpec("input-0", _torch_datatype(example.dtype), (ANY, *example.shape[1:]))]
            with torch.inference_mode():
                result = self._tensors(module(example))
            outputs = [TensorSpec(f"output-{i}", _torch_datatype(r.dtype), (ANY, *r.shape[1:]))
                       for i, r in enumerate(result)]
        super().__init__(platform, inputs, outputs)

    def _tensors(self, result: Any) -> list:
        if isinstance(result, self.torch.Tensor):
            return [result]
        if isinstance(result, (tuple, list)):
            return list(result)
        raise TypeError(f"the model returned {type(result).__name__}, not a tensor or a tuple of tensors")

    def predict(self, inputs: dict[str, np.ndarray], wanted: set[str]) -> dict[str, np.ndarray]:
        x = self.torch.from_numpy(np.ascontiguousarray(inputs["input-0"])).to(self.device)
        with self.torch.inference_mode():
            result = self._tensors(self.module(x))
        return {f"output-{i}": r.detach().cpu().numpy() for i, r in enumerate(result) if f"output-{i}" in wanted}


class ExportedPredictor(Predictor):
    """A ``torch.export`` program: its inputs in the order of ``forward``'s parameters (``input-0`` …,
    keyword-only ones last), its outputs flattened (``output-0`` …), each with the dtype and shape it
    was exported with; a dimension exported as dynamic is any size (-1)."""

    def __init__(self, program: Any) -> None:
        import torch
        from torch.utils import _pytree

        self.torch, self.flatten = torch, _pytree.tree_flatten
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if self.device.type != "cpu":  # an exported graph may name its device: the pass rewrites it
            program = torch.export.passes.move_to_device_pass(program, self.device)
        top = _kids(program.call_spec.in_spec)  # ((args…), {kwargs…})
        args, kwargs = _kids(top[0]), _kids(top[1])
        if not all(a.is_leaf() for a in args + kwargs):
            raise ValueError("the exported program takes nested inputs (lists or dicts of tensors): export one "
                             "whose forward takes tensors")
        self.positional, self.keywords = len(args), list(top[1].context or ())
        nodes = {n.name: n for n in program.graph.nodes}
        user = program.graph_signature.user_inputs
        inputs = [_spec(f"input-{i}", nodes[name].meta.get("val"), f"input {name!r}") for i, name in enumerate(user)]
        out = next(n for n in program.graph.nodes if n.op == "output").args[0]
        # the graph returns the buffers forward mutates before what forward returns
        mine = [o for o, s in zip(out, program.graph_signature.output_specs) if s.kind.name == "USER_OUTPUT"]
        outputs = [_spec(f"output-{i}", getattr(o, "meta", {}).get("val"), f"output {i}") for i, o in enumerate(mine)]
        self.module = program.module()
        super().__init__("pytorch_export", inputs, outputs)

    def predict(self, inputs: dict[str, np.ndarray], wanted: set[str]) -> dict[str, np.ndarray]:
        torch = self.torch
        given = [torch.from_numpy(np.ascontiguousarray(inputs[s.name])).to(self.device) for s in self.inputs]
        args, kwargs = given[:self.positional], dict(zip(self.keywords, given[self.positional:]))
        with torch.inference_mode():
            result, _ = self.flatten(self.module(*args, **kwargs))
        return {f"output-{i}": r.detach().cpu().numpy() for i, r in enumerate(result) if f"output-{i}" in wanted}


def _spec(name: str, val: Any, what: str) -> TensorSpec:
    shape = getattr(val, "shape", None)
    if shape is None or not hasattr(val, "dtype"):
        raise ValueError(f"the exported program's {what} is {type(val).__name__}, not a tensor")
    return TensorSpec(name, _torch_datatype(val.dtype), tuple(d if isinstance(d, int) else ANY for d in shape))


def _kids(spec: Any) -> list:
    """A pytree spec's children: ``children()`` in newer torch, ``children_specs`` (deprecated in 2.13) before."""
    return list(spec.children()) if callable(getattr(spec, "children", None)) else list(spec.children_specs)


def _torch_datatype(dtype: Any) -> str:
    import torch

    names = {torch.float32: "FP32", torch.float64: "FP64", torch.float16: "FP16", torch.int64: "INT64",
             torch.int32: "INT32", torch.int16: "INT16", torch.int8: "INT8", torch.uint8: "UINT8",
             torch.bool: "BOOL"}
    if dtype not in names:
        raise ValueError(f"the model's tensors are {dtype}, which the protocol has no datatype for")
    return names[dtype]
