"""A spec as YAML a person would write, for `trainyard run --dry-run` and the UI's job page alike."""

from __future__ import annotations

import yaml

from trainyard.spec.job import JobSpec
from trainyard.spec.units import format_memory, parse_memory


def to_yaml(spec: JobSpec) -> str:
    """The spec as YAML a person would write: only what differs from the defaults, memory in Mi/Gi.
    `trainyard run FILE` reads it back to the same spec."""
    data = spec.model_dump(mode="json", exclude_defaults=True)
    res = data.get("resources", {})
    if res.get("memory") is not None and format_memory(res["memory"]) != str(res["memory"]):
        text = format_memory(res["memory"])
        if parse_memory(text) == res["memory"]:  # only when the short form is exact
            res["memory"] = text
    if isinstance(res.get("cpu"), float) and res["cpu"].is_integer():
        res["cpu"] = int(res["cpu"])
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
