"""Run pipeline.yaml's steps here, one after another, without trainyard (for development and tests).

    python examples/imdb/run_local.py --out /tmp/imdb-run -p workers=5 -p epochs=3 -p batch=100
    python examples/imdb/run_local.py --out /tmp/imdb-run -p data=/path/to/aclImdb

It reads the commands from pipeline.yaml, so what runs here is what the
pipeline runs, and fills in the placeholders the way the contract says:
``{{params.x}}``, ``{{item}}``/``{{index}}`` in a ``foreach`` step,
``{{inputs.NAME}}`` (a path) and ``{{outputs.NAME}}`` (``<out>/<step>/<NAME>``;
for a foreach step ``<out>/<step>/<NAME>/<item>``, which makes the fan-in
folder ``<out>/<step>/<NAME>`` with one entry per item, as the runner hands
it over). Only what this pipeline uses is supported: plain steps, in file
order, run one at a time, no caching. ``python`` in a command is this
interpreter. Keep ``--out`` outside this folder: the pipeline snapshots it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}")
STEP_REF = re.compile(r"^steps\.([a-z0-9][a-z0-9-]*)\.outputs\.([A-Za-z0-9_-]+)$")


def substitute(text: str, values: dict[str, Any], where: str, shell: bool = False) -> str:
    """In a command (``shell``) each value is one shell word, quoted as trainyard quotes it."""
    def one(m: re.Match) -> str:
        key = m.group(1)
        if key in values:
            return shlex.quote(str(values[key])) if shell else str(values[key])
        raise SystemExit(f"{where}: unknown placeholder {{{{{key}}}}}")
    return PLACEHOLDER.sub(one, text)


def parse_value(text: str) -> Any:
    """``-p workers=5`` gives an int, ``-p data=/x`` a string: YAML's reading of the value."""
    value = yaml.safe_load(text)
    return "" if value is None else value


def items_of(step: dict, values: dict[str, Any], where: str) -> list[Any]:
    spec = step.get("foreach")
    if spec is None:
        return [None]
    if isinstance(spec, str):
        spec = parse_value(substitute(spec, values, f"{where}.foreach"))
    if isinstance(spec, bool) or not isinstance(spec, (int, list)):
        raise SystemExit(f"{where}.foreach: an int or a list, not {spec!r}")
    return list(range(spec)) if isinstance(spec, int) else spec


def run(pipeline: Path, out: Path, overrides: dict[str, Any]) -> dict[str, dict[str, Path]]:
    doc = yaml.safe_load(pipeline.read_text(encoding="utf-8"))
    params = {**(doc.get("params") or {}), **overrides}
    unknown = set(overrides) - set(doc.get("params") or {})
    if unknown:
        raise SystemExit(f"-p {', '.join(sorted(unknown))}: not a param of {pipeline.name}")
    produced: dict[str, dict[str, Path]] = {}  # step -> output -> path (a foreach step's: the fan-in folder)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name, step in doc["steps"].items():
        where = f"steps.{name}"
        step_params = {**params, **(step.get("params") or {})}
        base = {f"params.{k}": ("" if v is None else v) for k, v in step_params.items()}
        base.update({f"steps.{s}.outputs.{o}": p for s, outs in produced.items() for o, p in outs.items()})
        items = items_of(step, base, where)
        fanned = step.get("foreach") is not None
        produced[name] = {o: out / name / o for o in step.get("outputs", [])}
        for index, item in enumerate(items):
            values = dict(base)
            if fanned:
                values.update(item=item, index=index)
            for key, ref in (step.get("inputs") or {}).items():
                if isinstance(ref, dict):  # {value: "literal"}: written to a file, whose path the step gets
                    path = out / name / "inputs" / f"{key}-{index}"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(str(ref["value"]), encoding="utf-8")
                else:
                    path = Path(substitute(str(ref), values, f"{where}.inputs.{key}"))
                    path = path if path.is_absolute() else pipeline.parent / path
                if not path.exists():
                    raise SystemExit(f"{where}.inputs.{key}: {path} does not exist")
                values[f"inputs.{key}"] = path
            outputs = {o: (p / str(item) if fanned else p) for o, p in produced[name].items()}
            for o, p in outputs.items():
                p.parent.mkdir(parents=True, exist_ok=True)
                values[f"outputs.{o}"] = p
            command = substitute(str(step["command"]), values, f"{where}.command", shell=True)
            label = f"{name}-{index}" if fanned else name
            print(f"==> {label}: {command}", flush=True)
            t0 = time.perf_counter()
            workdir = pipeline.parent / step.get("workdir", ".")
            rc = subprocess.run(["bash", "-c", command], cwd=workdir, env=env).returncode
            if rc != 0:
                raise SystemExit(f"step {label} failed with exit code {rc}")
            missing = [o for o, p in outputs.items() if not p.exists()]
            if missing:
                raise SystemExit(f"step {label} succeeded but did not write its output {', '.join(missing)}")
            print(f"<== {label} done in {time.perf_counter() - t0:.1f}s", flush=True)
    return produced


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for every step's outputs")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE", help="override a param")
    p.add_argument("--pipeline", type=Path, default=HERE / "pipeline.yaml")
    args = p.parse_args(argv)
    overrides = {}
    for kv in args.param:
        key, sep, value = kv.partition("=")
        if not sep:
            p.error(f"-p {kv}: expected KEY=VALUE")
        overrides[key] = parse_value(value)
    run(args.pipeline.resolve(), args.out.resolve(), overrides)
    return 0


if __name__ == "__main__":
    sys.exit(main())
