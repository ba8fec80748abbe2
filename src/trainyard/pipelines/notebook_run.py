"""``python -m trainyard.pipelines.notebook_run NB [--out PATH] [-p key=value ...]``: execute a notebook.

Runs in the job's environment (only papermill and ipykernel needed there). Parameters are read as
JSON, else as YAML scalars, else kept as text, and injected by papermill after the cell tagged
``parameters``. The executed notebook — outputs and any error included — is written to ``--out``
(default ``$TRAINYARD_OUTPUT_DIR/<stem>.ipynb``). A failing cell exits 1 with a message naming it.

The kernel is this interpreter's ipykernel, from a kernel spec written to a temporary folder under
a name of its own, so no kernel installed elsewhere on the machine is picked up and nothing is
downloaded or written to the user's Jupyter folders.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from trainyard import envvars

KERNEL = "trainyard-python"


def parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        pass
    try:
        import yaml

        return yaml.safe_load(raw) if raw.strip() else ""
    except Exception:  # noqa: BLE001 - anything unreadable stays text
        return raw


def parse_params(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"-p {item!r}: expected key=value")
        out[key.strip()] = parse_value(raw)
    return out


def default_out(notebook: Path) -> Path:
    folder = os.environ.get(envvars.OUTPUT_DIR)
    return Path(folder) / notebook.name if folder else notebook.with_name(f"{notebook.stem}.out.ipynb")


def describe_failure(executed: Path, err: Any) -> str:
    """``cell 3 (tags: train; first line: x = 1 / 0) failed: ZeroDivisionError: division by zero``.

    The index is the cell's position in the user's notebook (0-based, as Jupyter's API counts),
    not counting the cell papermill injected.
    """
    index, tags = err.cell_index, []
    try:
        cells = json.loads(executed.read_text())["cells"]
        # papermill puts an error banner cell at the top; its index counts without it
        cells = [c for c in cells if "papermill-error-cell-tag" not in _tags(c)]
        index -= sum(1 for c in cells[: err.cell_index] if "injected-parameters" in _tags(c))
        tags = _tags(cells[err.cell_index])
    except (OSError, ValueError, KeyError, IndexError):
        pass
    first = next((ln.strip() for ln in (err.source or "").splitlines() if ln.strip()), "")
    what = [f"tags: {', '.join(tags)}"] if tags else []
    what.append(f"first line: {first[:80]}")
    return f"cell {index} ({'; '.join(what)}) failed: {err.ename}: {err.evalue}"


def _tags(cell: dict) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainyard.pipelines.notebook_run")
    ap.add_argument("notebook", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="where the executed notebook goes")
    ap.add_argument("-p", "--param", action="append", default=[], help="key=value (JSON or YAML scalar)")
    args = ap.parse_args(argv)
    params = parse_params(args.param)
    out = args.out or default_out(args.notebook)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        import papermill
        from ipykernel.kernelspec import write_kernel_spec
    except ImportError as e:
        print(f"running a notebook needs papermill and ipykernel in the job's environment ({e}): "
              f"pip install 'trainyard[notebooks]', or add papermill and ipykernel to env.pip", file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory(prefix="trainyard-kernel-") as tmp:
        write_kernel_spec(Path(tmp) / "kernels" / KERNEL, overrides={"display_name": "trainyard (this Python)"})
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (tmp, os.environ.get("JUPYTER_PATH")) if p)
        os.environ.setdefault("JUPYTER_RUNTIME_DIR", str(Path(tmp) / "runtime"))
        print(f"executing {args.notebook} with parameters {json.dumps(params)}", flush=True)
        try:
            papermill.execute_notebook(str(args.notebook), str(out), parameters=params, kernel_name=KERNEL,
                                       language="python",
                                       log_output=True, progress_bar=False)
        except papermill.PapermillExecutionError as e:
            print(f"\nnotebook {args.notebook}: {describe_failure(out, e)}", file=sys.stderr, flush=True)
            print(f"the executed notebook, with the error, is in {out}", file=sys.stderr, flush=True)
            return 1
    print(f"executed notebook written to {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
