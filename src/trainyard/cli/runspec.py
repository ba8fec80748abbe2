"""What `trainyard run` submits: a spec file, a notebook, a script or a bare command, with the
flags laid over it. One place turns flags into spec fields, so `--dry-run` prints exactly the
spec that would be submitted, as YAML that `trainyard run FILE` reads back unchanged."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainyard.errors import InvalidSpec, TrainyardError, Unschedulable
from trainyard.spec.job import JobSpec
from trainyard.spec.lines import error_entry, suggestion, validation_errors
from trainyard.spec.dump import to_yaml  # noqa: F401  (re-exported: `--dry-run` prints it)

SPEC_SUFFIXES = (".yaml", ".yml")
# the flag that sets each spec field, so an error on a flag's value names the flag
FLAG_OF = {"resources.cpu": "--cpu", "resources.memory": "--memory", "resources.gpu": "--gpu",
           "resources.gpu_type": "--gpu-type", "resources.node_selector": "--node-selector", "image": "--image",
           "env.pip": "--pip", "env.requirements": "--requirements", "queue": "--queue", "name": "--name",
           "env_vars": "--env", "params": "-p", "timeout": "--timeout", "retry.max": "--retries",
           "priority": "--priority", "command": "command", "secrets": "--secret", "after": "--after",
           "labels": "--label"}


@dataclass
class Flags:
    """Everything `trainyard run` can say on the command line; None (or empty) means "not given"."""

    params: dict[str, Any] = field(default_factory=dict)
    cpu: str | None = None
    memory: str | None = None
    gpu: int | None = None
    gpu_type: list[str] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    image: str | None = None
    pip: list[str] = field(default_factory=list)
    requirements: str | None = None
    queue: str | None = None
    name: str | None = None
    env_vars: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)  # variable -> secret name
    timeout: str | None = None
    retries: int | None = None
    priority: str | None = None
    after: list[str] = field(default_factory=list)  # JOB or JOB:succeeded|failed|ended
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Submission:
    """What to hand ``Client.submit``: a spec file as it is, or a spec with the folder it is relative to."""

    spec: JobSpec
    base_dir: Path
    path: Path | None = None  # the spec file, where the flags left it unchanged
    # -p keys a spec file does not declare: a typo, most likely (see _from_file)
    undeclared: list[str] = field(default_factory=list)


def key_values(items: list[str], flag: str) -> dict[str, str]:
    """``["A=1", "B=x"]`` → ``{"A": "1", "B": "x"}``; an item without ``=`` is an error naming ``flag``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidSpec(errors=[error_entry(flag, None, "", f"{item!r}: expected KEY=VALUE")])
        out[key.strip()] = value
    return out


def secret_flags(items: list[str]) -> dict[str, str]:
    """``--secret NAME`` (read under its own name) and ``--secret VARIABLE=NAME`` as a spec's ``secrets``."""
    return dict(item.partition("=")[::2] if "=" in item else (item, item) for item in items)


def build(target: list[str], flags: Flags, cwd: Path) -> Submission:
    """The job for ``trainyard run TARGET…``: a YAML spec, a notebook, a ``.py`` script (run with
    python, the rest of TARGET its arguments), or else a command run in ``cwd``."""
    if not target:
        raise InvalidSpec(errors=[error_entry("trainyard run", None, "", "give a spec file, a script, or "
                                              "a command after --, e.g. `trainyard run -- python train.py`")])
    first = Path(target[0])
    if first.suffix in (*SPEC_SUFFIXES, ".ipynb", ".py") and not first.is_file():
        near = [p.name for p in first.parent.glob(f"*{first.suffix}")] if first.parent.is_dir() else []
        raise InvalidSpec(errors=[error_entry(str(first), None, "", "no such file" + suggestion(first.name, near))])
    if first.suffix in (*SPEC_SUFFIXES, ".ipynb"):
        if len(target) > 1:
            raise InvalidSpec(errors=[error_entry(str(first), None, "", f"a spec or notebook takes no arguments "
                                                  f"(got {' '.join(target[1:])!r}); pass params with -p k=v")])
        return _from_file(first, flags, cwd)
    if first.suffix == ".py" and first.is_file():
        script = first.resolve()
        base = cwd if cwd in script.parents else script.parent
        data = {"name": _name(first.stem), "command": ["python", script.relative_to(base).as_posix(), *target[1:]]}
    else:
        base = cwd
        words = [Path(w) for w in target[:2]]
        script = words[1].stem if len(words) > 1 and words[0].name.startswith("python") and words[1].suffix == ".py" \
            else words[0].name
        data = {"name": _name(script), "command": list(target)}
    data["workdir"] = "."
    return Submission(_validate(_overlay(data, flags, base, cwd), "command line"), base)


def _from_file(path: Path, flags: Flags, cwd: Path) -> Submission:
    from trainyard.spec.loader import read_job, with_overrides

    base = path.resolve().parent
    rest = Flags(**{**flags.__dict__, "params": {}})  # params go in first: a notebook's cell, a spec's own check
    if path.suffix == ".ipynb":
        from trainyard.pipelines.notebook import job_from_notebook

        data = job_from_notebook(path, flags.params)
    else:
        spec, text = read_job(path)
        # -p keys the file does not declare (its command can use only those: JobSpec checks it) are not
        # refused: the job still sees them in trainyard.params(), which a script may read without declaring
        # anything; but a misspelt -p lrr=0.1 would otherwise run with the default lr without a word. (A
        # pipeline refuses them: its params reach its steps only through their declarations.)
        unused = sorted(set(flags.params) - set(spec.params))
        if flags.params:
            spec = with_overrides(spec, text, flags.params, path)
        data = spec.model_dump()
        if _overlay(data, rest, base, cwd) == data:
            return Submission(spec, base, path, unused)
        return Submission(_validate(_overlay(data, rest, base, cwd), f"{path} (with flags)"), base, undeclared=unused)
    return Submission(_validate(_overlay(data, rest, base, cwd), f"{path} (with flags)"), base)


def _overlay(data: dict[str, Any], f: Flags, base: Path, cwd: Path) -> dict[str, Any]:
    """``data`` with every given flag laid over it (lists and maps merged, scalars replaced)."""
    out = dict(data)
    res = dict(out.get("resources") or {})
    for key, value in (("cpu", f.cpu), ("memory", f.memory), ("gpu", f.gpu)):
        if value is not None:
            res[key] = value
    if f.gpu_type:
        res["gpu_type"] = f.gpu_type[0] if len(f.gpu_type) == 1 else list(f.gpu_type)
    if f.node_selector:
        res["node_selector"] = {**res.get("node_selector", {}), **f.node_selector}
    if res:
        out["resources"] = res
    if f.pip or f.requirements:
        env = dict(out.get("env") or {})
        env["pip"] = [*env.get("pip", []), *f.pip]
        if f.requirements:  # the spec reads it relative to its own folder
            env["requirements"] = os.path.relpath((cwd / f.requirements).resolve(), base)
        out["env"] = env
    if f.params:
        out["params"] = {**out.get("params", {}), **f.params}
    if f.env_vars:
        out["env_vars"] = {**out.get("env_vars", {}), **f.env_vars}
    if f.secrets:
        out["secrets"] = {**out.get("secrets", {}), **f.secrets}
    if f.retries is not None:
        out["retry"] = {**(out.get("retry") or {}), "max": f.retries}
    if f.after:
        out["after"] = [*(out.get("after") or []), *f.after]
    if f.labels:
        out["labels"] = {**(out.get("labels") or {}), **f.labels}
    for key in ("image", "queue", "name", "timeout", "priority"):
        if getattr(f, key) is not None:
            out[key] = getattr(f, key)
    if isinstance(f.priority, str) and f.priority.lstrip("-").isdigit():  # --priority 150: an integer, as in YAML
        out["priority"] = int(f.priority)
    return out


def _validate(data: dict[str, Any], source: str) -> JobSpec:
    try:
        return JobSpec.model_validate(data)
    except ValidationError as e:
        errors = validation_errors(e, {}, source, JobSpec)
        for err in errors:
            f = err["field"]
            flag = FLAG_OF.get(f) or FLAG_OF.get(f.rpartition(".")[0]) or FLAG_OF.get(f.partition(".")[0])
            if flag:
                err["where"] = f"{source} {flag} ({err['field']})"
        raise InvalidSpec(errors=errors) from None


def _name(text: str) -> str:
    """A job name from a script or program name: the characters a name allows, starting with one."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")[:63]
    return name or "job"


@contextmanager
def placed_at(path: Path | None, under: str | None = None) -> Iterator[None]:
    """Around a submit of what ``path`` says: the server's refusal said at the line of the file that said it
    (:func:`refused`)."""
    try:
        yield
    except (InvalidSpec, Unschedulable) as e:
        raise refused(e, path, under) from None


def refused(e: TrainyardError, path: Path | None, under: str | None = None) -> TrainyardError:
    """The server's refusal of a submitted spec (``InvalidSpec``: an unknown queue, a missing secret;
    ``Unschedulable``: more GPUs, cores or memory than any node has) said as the spec's own errors are: each at
    the line of ``path`` that set its field (:func:`~trainyard.spec.lines.placed`), and exiting as they do (2:
    nothing was submitted). ``path`` None (the flags' spec, a notebook's): no line of a file says it. A refusal
    that names no field is said as it is. ``under``: the key of ``path`` that holds the job the server checked
    (a sweep's or a schedule's ``job``), whose fields it names as the job's own (``queue``, not ``job.queue``)."""
    errors = getattr(e, "errors", None)
    if errors is None:  # Unschedulable: its field in details, its message "field: why"
        field = e.details.get("field")
        if not field:
            return e
        errors = [{"field": field, "line": None, "where": field, "message": e.message.removeprefix(f"{field}: ")}]
    if under:  # a request body's field ("in") or one placed already is not the job's
        errors = [{**err, "field": f"{under}.{err['field']}", "where": f"{under}.{err['field']}"}
                  if err.get("field") and err.get("line") is None and not err.get("in") else err for err in errors]
    if path is None:
        return InvalidSpec(errors=errors)
    from trainyard.spec.kubeflow import is_pytorchjob_text
    from trainyard.spec.lines import placed

    text = path.read_text()
    return InvalidSpec(errors=errors if is_pytorchjob_text(text) else placed(errors, text, str(path)))
