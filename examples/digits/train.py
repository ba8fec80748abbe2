"""Train a small MLP on scikit-learn's bundled digits (8x8 images, 10 classes).

Runs under trainyard (``trainyard run job.yaml``) or by hand
(``python train.py``: outputs land in ./outputs, checkpoints in ./checkpoints).

Each epoch is one ``partial_fit`` pass over the training set. After every
epoch the model is checkpointed to ``trainyard.checkpoint_dir()``, which
outlives an attempt, so a retried attempt resumes from the last epoch done
instead of starting over. At the end ``model.pkl`` (a fitted
``sklearn.pipeline.Pipeline``: scaler + MLP) and ``metrics.json`` go to
``trainyard.output_dir()``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import trainyard

CKPT_PREFIX, KEEP = "epoch-", 3


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--lr", type=float, default=0.003, help="Adam learning rate")
    p.add_argument("--hidden", type=int, default=64, help="units in the hidden layer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--crash-at", type=int, default=0,
                   help="raise after this epoch on attempt 1 (to see a retry resume); 0: never")
    return p.parse_args()


def load_data(seed: int):
    """70% train, 15% validation, 15% test, stratified; features scaled on train only."""
    X, y = load_digits(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    X_val, X_test, y_val, y_test = train_test_split(X_rest, y_rest, test_size=0.5, stratify=y_rest,
                                                    random_state=seed)
    scaler = StandardScaler().fit(X_train)
    return scaler, (X_train, y_train), (X_val, y_val), (X_test, y_test)


def latest_checkpoint(folder: Path) -> Path | None:
    found = sorted(folder.glob(f"{CKPT_PREFIX}*.pkl"))
    return found[-1] if found else None


def save_checkpoint(folder: Path, epoch: int, state: dict) -> None:
    """Write atomically (a crash mid-write never leaves a torn checkpoint); keep the last few."""
    path = folder / f"{CKPT_PREFIX}{epoch:04d}.pkl"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(state, f)
    os.replace(tmp, path)
    for old in sorted(folder.glob(f"{CKPT_PREFIX}*.pkl"))[:-KEEP]:
        old.unlink(missing_ok=True)


def main() -> int:
    args = parse_args()
    attempt = int(os.environ.get("TRAINYARD_ATTEMPT") or 1)
    t0 = time.perf_counter()
    scaler, (X_train, y_train), (X_val, y_val), (X_test, y_test) = load_data(args.seed)
    X_train_s, X_val_s = scaler.transform(X_train), scaler.transform(X_val)
    classes = np.unique(y_train)
    print(f"digits: {len(y_train)} train / {len(y_val)} val / {len(y_test)} test, "
          f"hidden={args.hidden} lr={args.lr} epochs={args.epochs} seed={args.seed} (attempt {attempt})")

    ckpt_dir = trainyard.checkpoint_dir()
    start, model = 1, None
    if (ckpt := latest_checkpoint(ckpt_dir)) is not None:
        with open(ckpt, "rb") as f:
            state = pickle.load(f)
        if state["args"] == {k: v for k, v in vars(args).items() if k != "crash_at"}:
            model, start = state["model"], state["epoch"] + 1
            print(f"resuming from {ckpt.name}: epoch {state['epoch']} done")
        else:
            print(f"ignoring {ckpt.name}: it was trained with other params")
    if model is None:
        model = MLPClassifier(hidden_layer_sizes=(args.hidden,), learning_rate_init=args.lr, alpha=1e-4,
                              batch_size=64, random_state=args.seed)

    for epoch in range(start, args.epochs + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.partial_fit(X_train_s, y_train, classes=classes)
        val_acc = float(model.score(X_val_s, y_val))
        loss = float(model.loss_)
        trainyard.log_metrics(step=epoch, train_loss=loss, val_accuracy=val_acc)
        print(f"epoch {epoch:3d}/{args.epochs}  train_loss {loss:.4f}  val_acc {val_acc:.4f}"
              f"  ({time.perf_counter() - t0:.1f}s)", flush=True)
        save_checkpoint(ckpt_dir, epoch, {"epoch": epoch, "model": model,
                                          "args": {k: v for k, v in vars(args).items() if k != "crash_at"}})
        if epoch == args.crash_at and attempt == 1:
            raise SystemExit(f"crashing after epoch {epoch} on purpose (--crash-at)")

    pipeline = make_pipeline(scaler, model)  # the scaler travels with the model
    test_acc = float(pipeline.score(X_test, y_test))
    val_acc = float(pipeline.score(X_val, y_val))
    trainyard.log_metrics(step=args.epochs, test_accuracy=test_acc)

    out = trainyard.output_dir()
    with open(out / "model.pkl", "wb") as f:
        pickle.dump(pipeline, f)
    summary = {"test_accuracy": test_acc, "val_accuracy": val_acc, "epochs": args.epochs,
               "params": {k: v for k, v in vars(args).items() if k != "crash_at"},
               "n_train": len(y_train), "n_test": len(y_test), "seconds": round(time.perf_counter() - t0, 2)}
    (out / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"test accuracy {test_acc:.4f}; wrote {out / 'model.pkl'} and {out / 'metrics.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
