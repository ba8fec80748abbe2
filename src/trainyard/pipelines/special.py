"""Special pipeline steps — notebooks and Kubeflow components — expanded into plain steps.

The pipeline runner calls :func:`inline_local` on the client (which can read local files) and
:func:`expand_step` on the server, once params are known. A notebook step becomes one plain step; a
container component one; a graph component one per task, named ``{step}-{task}``.
"""

from __future__ import annotations

import pathlib
import posixpath
from typing import Any

from trainyard.errors import InvalidSpec
from trainyard.pipelines.catalog import Catalog
from trainyard.pipelines.expansion import Expansion
from trainyard.pipelines.kfp_expand import expand_component_step
from trainyard.pipelines.notebook import expand_notebook
from trainyard.spec.pipeline import is_special

__all__ = ["Catalog", "Expansion", "expand_step", "inline_local", "is_special"]


def expand_step(name: str, raw: dict, catalog: Catalog, params: dict, images: bool = True) -> Expansion:
    """Plain steps for a notebook or component step; ``images``: whether the server has a container runtime for a
    component's image (none: no warning that the image is not used).

    Errors are :class:`InvalidSpec`; each ``field`` is relative to the step (``arguments.lr``), as the
    pipeline loader puts it under ``steps.<name>`` itself. A mistake inside a component file is
    reported on ``component``, its message starting with the file, line and field
    (``c.yaml:14 implementation.container.args[1].inputValue: unknown input 'rate'``).
    """
    try:
        return _expand(name, raw, catalog, params, images)
    except InvalidSpec as e:
        raise InvalidSpec(errors=[_relative(name, err) for err in e.errors]) from None


def _expand(name: str, raw: dict, catalog: Catalog, params: dict, images: bool) -> Expansion:
    if "notebook" in raw and "component" in raw:
        raise InvalidSpec(errors=[_entry(f"steps.{name}", "a step is a notebook or a component, not both")])
    if "notebook" in raw:
        return expand_notebook(name, raw, params)
    if "component" in raw:
        return expand_component_step(name, raw, catalog, params, images)
    raise InvalidSpec(errors=[_entry(f"steps.{name}", "not a notebook or component step")])


def _relative(name: str, err: dict[str, Any]) -> dict[str, Any]:
    prefix = f"steps.{name}"
    field_ = str(err.get("field") or "")
    if field_ == prefix or field_.startswith(prefix + "."):
        return {**err, "field": field_[len(prefix) + 1:], "where": field_}
    return {"field": "component", "line": None, "where": f"{prefix}.component",
            "message": f"{err.get('where') or field_}: {err.get('message')}"}


def inline_local(raw_steps: dict[str, dict], base_dir: pathlib.Path) -> dict[str, dict]:
    """Raw steps with each local ``component:`` file read and inlined as
    ``{"inline": text, "source": path, "files": {path: text}}`` (``files``: local components its graph
    refers to by relative ``url``). Notebook paths, URLs and catalog names are left as they are."""
    out = {}
    for name, raw in raw_steps.items():
        comp = raw.get("component") if isinstance(raw, dict) else None
        if comp is not None and isinstance(raw.get("arguments"), dict):
            raw = {**raw, "arguments": _local_arguments(name, raw["arguments"], base_dir)}
        local = _local_path(comp, base_dir)
        if local is None:
            out[name] = raw
            continue
        where = f"steps.{name}.component"
        if not local.is_file():
            raise InvalidSpec(errors=[_entry(where, f"component file {comp!r} not found (looked in {local})")])
        files: dict[str, str] = {}
        _collect_refs(local, files, where)
        out[name] = {**raw, "component": {"inline": local.read_text(), "source": str(local), "files": files}}
    return out


def _local_arguments(name: str, arguments: dict, base_dir: pathlib.Path) -> dict:
    """``{path: p}`` arguments made absolute: the server cannot tell what they were relative to."""
    out = {}
    for key, value in arguments.items():
        if isinstance(value, dict) and set(value) == {"path"} and isinstance(value["path"], str) \
                and "://" not in value["path"] and "{{" not in value["path"]:
            path = (base_dir / value["path"]).resolve()
            if not path.exists():
                raise InvalidSpec(errors=[_entry(f"steps.{name}.arguments.{key}",
                                                 f"{value['path']!r} does not exist (looked in {path})")])
            value = {"path": str(path)}
        out[key] = value
    return out


def _local_path(comp: Any, base_dir: pathlib.Path) -> pathlib.Path | None:
    """The file a ``component:`` names, if it names one; names and URLs are for the server's catalog."""
    if isinstance(comp, dict) and isinstance(comp.get("url"), str) and len(comp) == 1:
        comp = comp["url"]
    if not isinstance(comp, str) or "://" in comp:
        return None
    path = (base_dir / comp).resolve()
    looks_like_file = comp.endswith((".yaml", ".yml")) or "/" in comp or comp.startswith(".")
    return path if looks_like_file or path.is_file() else None


def _collect_refs(path: pathlib.Path, files: dict[str, str], where: str, depth: int = 0) -> None:
    """Read the local files a graph component's tasks name by ``componentRef.url``, recursively."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, OSError):
        return  # the server reports it, with the line
    if not isinstance(data, dict):
        return
    tasks = ((data.get("implementation") or {}).get("graph") or {}).get("tasks")
    if not isinstance(tasks, dict) or depth > 8:
        return
    for task in tasks.values():
        ref = task.get("componentRef") if isinstance(task, dict) else None
        url = ref.get("url") if isinstance(ref, dict) else None
        if not isinstance(url, str) or "://" in url:
            continue
        # keyed as the server joins it (kfp_load._join), so it finds the file without reading disks
        key = posixpath.normpath(posixpath.join(posixpath.dirname(str(path)), url))
        target = pathlib.Path(key)
        if key not in files and target.is_file():
            files[key] = target.read_text()
            _collect_refs(target, files, where, depth + 1)


def _entry(field_: str, message: str) -> dict[str, Any]:
    return {"field": field_, "line": None, "where": field_, "message": message}

