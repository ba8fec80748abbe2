#!/usr/bin/env bash
# `make demo`: train examples/digits on a local trainyard server and fetch the model.
# Expects the venv's bin on PATH (the Makefile puts it there).
# TRAINYARD_HOME defaults to ./.trainyard-demo, so the demo never touches ~/.trainyard.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export TRAINYARD_HOME="${TRAINYARD_HOME:-$PWD/.trainyard-demo}"
OUT=demo-output

# Stop the background server on the way out, but only if this script started it.
if trainyard server status >/dev/null 2>&1; then ours=0; else ours=1; fi
stop_server() { if [ "$ours" = 1 ]; then trainyard server stop || true; fi; }
trap stop_server EXIT

job=$(trainyard run examples/digits/job.yaml)   # without --follow: prints only the id
echo "submitted $job (state in $TRAINYARD_HOME)"
trainyard logs --follow "$job"                   # returns when the job ends
trainyard show "$job"

status=$(trainyard show "$job" -o json | python -c 'import json, sys; print(json.load(sys.stdin)["status"])')
if [ "$status" != succeeded ]; then
  echo "demo: job $job $status; TRAINYARD_HOME=$TRAINYARD_HOME trainyard logs $job shows why" >&2
  exit 1
fi

rm -rf "$OUT"
trainyard download "$job" --to "$OUT"
python - "$OUT" <<'PY'
import json, pickle, sys
from pathlib import Path
from sklearn.datasets import load_digits

out = Path(sys.argv[1])
print(f"test accuracy: {json.loads((out / 'metrics.json').read_text())['test_accuracy']:.4f}")
model = pickle.load(open(out / "model.pkl", "rb"))
X, y = load_digits(return_X_y=True)
print(f"model: {out.resolve() / 'model.pkl'} ({type(model).__name__}: scaler + MLP; predicts {model.predict(X[:8])} for digits {y[:8]})")
print(f"""load it:
    import pickle
    model = pickle.load(open("{out}/model.pkl", "rb"))
    model.predict(X)  # X: rows of 64 pixel values (0-16), as sklearn.datasets.load_digits gives""")
PY
