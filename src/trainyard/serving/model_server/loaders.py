"""Model files in, predictors out: scikit-learn (pickle, joblib), XGBoost (native JSON/UBJ, pickled),
PyTorch (``torch.export`` programs, TorchScript, or a state dict with ``--module pkg.mod:Factory``).

:func:`resolve` runs before the server starts (a wrong path or format fails at once, with its
reason); :func:`load` runs after it listens (the server answers "not ready" meanwhile).
XGBoost and torch are imported only for models that need them.

Loading a pickle runs code from the file: serve only models you trust (your own jobs' outputs).
A state dict is read with ``torch.load(weights_only=True)``; the module that gives it a shape
is code you name on the command line.
"""

from __future__ import annotations

import importlib
import inspect
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainyard.serving.model_server.predictors import EstimatorPredictor, ExportedPredictor, Predictor, \
    TorchPredictor

FORMATS = ("auto", "sklearn", "xgboost", "torch-export", "torchscript", "torch-state-dict")
_EXTENSIONS = {".joblib": "sklearn", ".pkl": "sklearn", ".pickle": "sklearn", ".json": "xgboost",
               ".ubj": "xgboost", ".bst": "xgboost", ".pt2": "torch", ".pt": "torch", ".pth": "torch",
               ".ts": "torch", ".torchscript": "torch"}
# what pickles look like on disk, bare or as joblib compresses them (zlib, gzip, bz2, xz, lzma)
_PICKLE_MAGIC = (b"\x80", b"\x78", b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"\x5d\x00\x00")


class ModelError(Exception):
    """The model cannot be served; the message says which file and why."""


@dataclass(frozen=True, slots=True)
class Source:
    path: Path
    format: str
    module: str | None = None


def resolve(path: Path, fmt: str = "auto", module: str | None = None) -> Source:
    path = Path(path)
    if fmt not in FORMATS:
        raise ModelError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    if not path.exists():
        raise ModelError(f"--model: {path} does not exist")
    if path.is_dir():
        path = _only_model_in(path)
    if module is not None and ":" not in module:
        raise ModelError(f"--module: {module!r} is not pkg.mod:Factory")
    if fmt == "auto":
        fmt = "torch-state-dict" if module else _sniff(path)
    if fmt == "torch-state-dict" and not module:
        raise ModelError(f"--model: {path} is a PyTorch state dict (no TorchScript code in it): give "
                         "--module pkg.mod:Factory, the class or function that builds the module")
    return Source(path, fmt, module)


def _only_model_in(folder: Path) -> Path:
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    known = [p for p in files if _looks_like_a_model(p)]
    if len(files) == 1:
        return files[0]
    if len(known) == 1:
        return known[0]
    if not files:
        raise ModelError(f"--model: the folder {folder} holds no file")
    raise ModelError(f"--model: the folder {folder} holds several files ({', '.join(p.name for p in files[:8])}): "
                     "name the model file itself")


def _looks_like_a_model(path: Path) -> bool:
    """By extension; a ``.json`` only if XGBoost wrote it (a job's outputs often hold ``metrics.json``)."""
    if path.suffix.lower() != ".json":
        return path.suffix.lower() in _EXTENSIONS
    with open(path, "rb") as f:
        return f.read(64).lstrip().startswith(b'{"learner"')


def _sniff(path: Path) -> str:
    kind = _EXTENSIONS.get(path.suffix.lower())
    with open(path, "rb") as f:
        head = f.read(8)
    if kind in (None, "torch") and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
        # torch.export.save writes an archive_format entry ("pt2"); torch.jit.save code/ and constants.pkl
        # beside data.pkl; torch.save only data.pkl
        if any(n.endswith("/archive_format") or n == "archive_format" for n in names):
            return "torch-export"
        if any("/code/" in n or n.endswith("constants.pkl") for n in names):
            return "torchscript"
        return "torch-state-dict"
    if kind and kind != "torch":
        return kind
    if head.startswith(b"{"):
        return "xgboost"  # JSON and UBJSON models both open with an object
    if head.startswith(_PICKLE_MAGIC):
        return "sklearn"
    raise ModelError(f"--model: cannot tell what {path} is (not a pickle, joblib, XGBoost or PyTorch file): "
                     f"give --format ({', '.join(FORMATS[1:])})")


def load(source: Source) -> Predictor:
    loader = {"sklearn": _sklearn, "xgboost": _xgboost, "torch-export": _exported, "torchscript": _torchscript,
              "torch-state-dict": _state_dict}[source.format]
    try:
        return loader(source)
    except ModelError:
        raise
    except ModuleNotFoundError as e:
        raise ModelError(f"{source.path} ({source.format}) needs the Python package {e.name!r}: "
                         f"pip install {e.name}") from e
    except Exception as e:  # noqa: BLE001 - whatever a corrupt file raises, the operator needs its reason
        raise ModelError(f"{source.path}: cannot load it as {source.format}: {type(e).__name__}: {e}") from e


def _sklearn(source: Source) -> Predictor:
    try:
        import joblib  # scikit-learn's own dependency; reads plain pickles too
        model = joblib.load(source.path)
    except ImportError:
        import pickle
        with open(source.path, "rb") as f:
            model = pickle.load(f)  # noqa: S301 - the operator's own model (see the module docstring)
    if not hasattr(model, "predict"):
        raise ModelError(f"{source.path}: holds a {type(model).__name__}, which has no predict()")
    platform = "xgboost" if type(model).__module__.startswith("xgboost") else "sklearn"
    return EstimatorPredictor(model, platform)


def _xgboost(source: Source) -> Predictor:
    try:
        import xgboost
    except ImportError:
        raise ModelError(f"{source.path} is an XGBoost model (native JSON/UBJ format): serving it needs the "
                         "xgboost package (pip install xgboost, or xgboost-cpu)") from None
    booster = xgboost.Booster()
    booster.load_model(str(source.path))
    return EstimatorPredictor(BoosterModel.wrap(booster, xgboost), "xgboost")


class BoosterModel:
    """A native XGBoost booster with scikit-learn's face; its objective says what it predicts."""

    allow_nan = True  # XGBoost reads NaN as "missing"

    def __init__(self, booster: Any, xgboost: Any, objective: str) -> None:
        self.booster, self.xgboost, self.objective = booster, xgboost, objective
        self.n_features_in_ = booster.num_features()
        if booster.feature_names:
            self.feature_names_in_ = np.asarray(booster.feature_names)

    @classmethod
    def wrap(cls, booster: Any, xgboost: Any) -> BoosterModel:
        learner = json.loads(booster.save_config())["learner"]
        objective = learner["objective"]["name"]
        if objective in ("binary:logistic", "multi:softprob"):
            classes = max(int(learner["learner_model_param"].get("num_class", "0")), 2)
            return BoosterClassifier(booster, xgboost, objective, classes)
        return cls(booster, xgboost, objective)

    def _raw(self, x: np.ndarray) -> np.ndarray:
        names = getattr(self, "feature_names_in_", None)
        matrix = self.xgboost.DMatrix(x, feature_names=None if names is None else list(names))
        return np.asarray(self.booster.predict(matrix))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self._raw(x)


class BoosterClassifier(BoosterModel):
    def __init__(self, booster: Any, xgboost: Any, objective: str, classes: int) -> None:
        super().__init__(booster, xgboost, objective)
        self.classes_ = np.arange(classes)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        p = self._raw(x)
        return np.column_stack([1 - p, p]) if p.ndim == 1 else p

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.classes_[self.predict_proba(x).argmax(axis=1)]


def _exported(source: Source) -> Predictor:
    """A ``torch.export.save`` archive (``.pt2``): PyTorch's successor to TorchScript, which 2.13
    deprecates. The program carries its own signature, so no example input is needed."""
    import torch

    return ExportedPredictor(torch.export.load(str(source.path)))


def _torchscript(source: Source) -> Predictor:
    import torch

    module = torch.jit.load(str(source.path), map_location="cpu").eval()
    # a scripted module keeps its attributes: an `example_input` tensor gives the signature
    return TorchPredictor(module, "pytorch_torchscript", getattr(module, "example_input", None))


def _state_dict(source: Source) -> Predictor:
    """``Factory(**config, **named extras)``, then its ``load_state_dict``.

    A checkpoint is either a bare state dict or a mapping with ``state_dict`` (the weights),
    ``config`` (the factory's keyword arguments) and any other entries; the factory also gets
    each other entry that its signature names (the IMDB example's ``vocab``). ``example_input``
    (a tensor), if present, gives the signature.
    """
    import torch

    factory = _import(source.module or "")
    saved = torch.load(source.path, map_location="cpu", weights_only=True)
    if isinstance(saved, dict) and isinstance(saved.get("state_dict"), dict):
        state, extras = saved["state_dict"], {k: v for k, v in saved.items() if k != "state_dict"}
    else:
        state, extras = saved, {}
    kwargs = dict(extras.get("config") or {})
    params = inspect.signature(factory).parameters
    kwargs.update({k: v for k, v in extras.items() if k in params and k not in kwargs})
    model = factory(**kwargs)
    model.load_state_dict(state)
    model.eval()
    if hasattr(model, "predict"):
        return EstimatorPredictor(model, "pytorch")
    return TorchPredictor(model, "pytorch", extras.get("example_input"))


def _import(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ModelError(f"--module: cannot import {module_name!r} ({e}); run from the folder that holds it "
                         "or put it on PYTHONPATH") from e
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ModelError(f"--module: {module_name} has no callable {attr!r}")
    return factory
