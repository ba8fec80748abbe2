"""A pipeline file read and checked on the client, before anything is uploaded or run.

Apart from :mod:`trainyard.spec.pipeline` because it needs the whole graph check
(:mod:`trainyard.spec.pipeline_graph`), which itself builds on the spec.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from trainyard.errors import InvalidSpec
from trainyard.spec.lines import Written, compose, error_entry
from trainyard.spec.pipeline import Errors, PipelineSpec, merge_params, parse_pipeline
from trainyard.spec.pipeline_graph import build


class Loaded(BaseModel):
    """A pipeline file as the client read it: the spec, the params in effect, its folder."""

    spec: PipelineSpec
    params: dict[str, Any]
    base_dir: str
    source: str


def load_pipeline(path: str | Path, overrides: dict[str, Any] | None = None, written: Written | None = None) -> Loaded:
    """Read and check a pipeline file (graph included) before anything is uploaded or run; ``written``: where
    ``overrides`` were written, if in a file (a schedule's), for their errors.

    Notebook and component steps are checked as far as the client can see them;
    the server expands and checks them again against its catalog.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InvalidSpec(errors=[error_entry(str(path), None, "", f"cannot read: {e.strerror}")]) from None
    data, lines = compose(text, str(path))
    if isinstance(data, dict) and isinstance(data.get("steps"), dict):
        errs = Errors(str(path), lines)
        data["steps"] = {n: _with_job_file(n, s, path.resolve().parent, errs) if isinstance(s, dict) else s
                         for n, s in data["steps"].items()}
        errs.raise_if_any()
    spec = parse_pipeline(data, str(path), lines)
    params = merge_params(spec, overrides, str(path), written)
    build(spec, params, lines=lines, source=str(path), expand=None)
    return Loaded(spec=spec, params=params, base_dir=str(path.resolve().parent), source=str(path))


def _with_job_file(name: str, raw: dict[str, Any], base: Path, errs: Errors) -> dict[str, Any]:
    """A step ``job: train.yaml`` takes that job spec's fields; the step's own keys win.

    The job file's ``workdir`` stays relative to the job file. Its ``inputs`` and
    ``outputs`` are job-style (paths, globs), so a step says its own instead.
    """
    ref = raw.get("job")
    if ref is None:
        return raw
    loc = ("steps", name, "job")
    if not isinstance(ref, str):
        errs.add(loc, "give the path of a job spec file, relative to the pipeline file")
        return raw
    job_path = base / ref
    try:
        job = yaml.safe_load(job_path.read_text())
    except (OSError, yaml.YAMLError) as e:
        errs.add(loc, f"cannot read {job_path}: {getattr(e, 'strerror', None) or e}")
        return raw
    if not isinstance(job, dict):
        errs.add(loc, f"{job_path} is not a job spec (a mapping of fields)")
        return raw
    extra = sorted(k for k in ("inputs", "outputs") if k in job)
    if extra:
        errs.add(loc, f"{job_path} has {' and '.join(extra)}: give them in the step instead")
    job = {k: v for k, v in job.items() if k not in ("name", "inputs", "outputs")}
    folder = job_path.parent
    job["workdir"] = os.path.relpath(folder / str(job.get("workdir") or "."), base)
    return {**job, **{k: v for k, v in raw.items() if k != "job"}}
