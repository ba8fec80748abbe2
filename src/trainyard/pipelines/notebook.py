"""Notebooks as jobs and as pipeline steps, run by papermill through :mod:`trainyard.pipelines.notebook_run`.

Parameters go on the command line as JSON (``-p lr=0.1``), so the notebook gets them with their types;
papermill injects them after the cell tagged ``parameters``. The executed notebook, with its outputs
and any error, is ``<name>.ipynb`` in the output folder ``notebook`` of a step, or in a job's outputs.
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path
from typing import Any

from trainyard.errors import InvalidSpec
from trainyard.pipelines.expansion import Expansion
from trainyard.spec.params import refs, substitute
from trainyard.templates import PARAM_REF

NOTEBOOK_PIP = ["papermill>=2.5", "ipykernel>=6"]
OUTPUT = "notebook"


def _problem(field: str, message: str) -> InvalidSpec:
    return InvalidSpec(errors=[{"field": field, "line": None, "where": field, "message": message}])


def notebook_command(notebook: str, params: dict[str, Any], out: str | None = None) -> list[str]:
    argv = ["python", "-m", "trainyard.pipelines.notebook_run", notebook]
    if out:
        argv += ["--out", out]
    for key, value in params.items():
        argv += ["-p", f"{key}={json.dumps(value)}"]
    return argv


def with_notebook_env(env: Any) -> Any:
    """A job's own ``env.pip`` builds a fresh virtualenv: papermill and a kernel must be in it."""
    if not isinstance(env, dict) or not (env.get("pip") or env.get("requirements")):
        return env
    pip = list(env.get("pip") or [])
    have = {re.split(r"[<>=!~\[ ;]", str(p), maxsplit=1)[0].lower() for p in pip}
    pip += [p for p in NOTEBOOK_PIP if re.split(r"[<>=]", p)[0] not in have]
    return {**env, "pip": pip}


def resolve_params(values: dict[str, Any], params: dict[str, Any], where: str) -> dict[str, Any]:
    """``{{params.x}}`` in a notebook step's params, from the pipeline's; a whole reference keeps its type."""
    out = {}
    for key, value in values.items():
        if isinstance(value, str) and refs(value):
            for ref in refs(value):
                if ref not in params:
                    raise _problem(f"{where}.{key}", f"unknown param {ref!r} (params: {', '.join(params) or 'none'})")
            whole = PARAM_REF.fullmatch(value.strip())
            value = params[whole.group(1)] if whole else substitute(value, params)
        out[key] = value
    return out


def expand_notebook(name: str, raw: dict[str, Any], params: dict[str, Any]) -> Expansion:
    nb = raw.get("notebook")
    if not isinstance(nb, str) or not nb.endswith(".ipynb"):
        raise _problem(f"steps.{name}.notebook", "expected the path of a .ipynb file (relative to the workdir)")
    step_params = raw.get("params") or {}
    if not isinstance(step_params, dict):
        raise _problem(f"steps.{name}.params", "expected a mapping of parameter name to value")
    if "command" in raw:
        raise _problem(f"steps.{name}.command", "not allowed on a notebook step: the notebook is the command")
    outputs = raw.get("outputs") or []
    if not isinstance(outputs, list):
        raise _problem(f"steps.{name}.outputs", "expected a list of output names")
    values = resolve_params(step_params, params, f"steps.{name}.params")
    plain = {k: v for k, v in raw.items() if k not in ("notebook", "params")}
    # a folder holding <name>.ipynb, so a download is a file Jupyter opens
    plain["command"] = notebook_command(nb, values, f"{{{{outputs.{OUTPUT}}}}}/{posixpath.basename(nb)}")
    plain["outputs"] = [*outputs, *([] if OUTPUT in outputs else [OUTPUT])]
    if "env" in plain:
        plain["env"] = with_notebook_env(plain["env"])
    return Expansion({name: plain}, {o: f"{name}.{o}" for o in plain["outputs"]}, [])


def job_from_notebook(path: Path, params: dict[str, Any]) -> dict[str, Any]:
    """The job spec (a dict, for ``Client.submit`` with ``base_dir=path.parent``) that runs a notebook.

    The work dir is the notebook's folder (its data files come along); the executed notebook lands
    in the job's outputs as ``<stem>.ipynb``.
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-.")[:63] or "notebook"
    if not name[0].isalnum():
        name = f"nb-{name}"[:63]
    _check_notebook(path)
    return {"name": name, "command": notebook_command(path.name, params), "workdir": ".", "params": params}


def _check_notebook(path: Path) -> None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise _problem(str(path), f"not a readable notebook: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise _problem(str(path), "not a Jupyter notebook (no cells)")
