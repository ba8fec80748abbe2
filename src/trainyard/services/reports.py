"""A launcher's report body, checked: each bad part is an error naming its field.

The body is JSON from a process the job can reach, so nothing in it is
trusted: wrong types are refused here (an ``InvalidSpec``, 422), never left to
fail as a 500 deeper down. Its shape is written in :mod:`trainyard.launch.reporter`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainyard.artifacts.paths import output_record_problem
from trainyard.errors import InvalidSpec

PHASES = ("running", "exited")


@dataclass(slots=True)
class Report:
    running: bool                           # the command has started (its first such report starts the replica)
    log: tuple[int, str] | None             # (byte offset, text)
    metrics: tuple[int, list[str]] | None   # (byte offset, complete JSON lines)
    result: dict[str, Any] | None           # the replica's result, with its last report only


def parse_report(body: dict[str, Any]) -> Report:
    errors: list[dict[str, Any]] = []

    def bad(field: str, message: str) -> None:
        errors.append({"field": field, "line": None, "where": field, "message": message})

    phase = body.get("phase")
    if phase is not None and phase not in PHASES:
        bad("phase", f"must be one of {', '.join(PHASES)}")
    log = _part(body.get("log"), "log", "data", str, bad)
    metrics = _part(body.get("metrics"), "metrics", "lines", list, bad)
    if metrics and not all(isinstance(x, str) for x in metrics[1]):
        bad("metrics.lines", "must be a list of strings")
    result = body.get("result") if phase == "exited" else None
    if result is not None:
        _check_result(result, bad)
    if errors:
        raise InvalidSpec(errors=errors)
    return Report(running=phase in ("running", "exited"), log=log, metrics=metrics, result=result)


def _part(value: Any, name: str, key: str, kind: type, bad) -> tuple[int, Any] | None:  # noqa: ANN001
    if value is None:
        return None
    if not isinstance(value, dict):
        bad(name, f"must be an object with offset and {key}")
        return None
    offset, data = value.get("offset"), value.get(key)
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        bad(f"{name}.offset", "must be a non-negative integer")
        return None
    if not isinstance(data, kind):
        bad(f"{name}.{key}", f"must be a {'string' if kind is str else 'list'}")
        return None
    return offset, data


def _check_result(result: Any, bad) -> None:  # noqa: ANN001
    if not isinstance(result, dict):
        bad("result", "must be an object")
        return
    code = result.get("exit_code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        bad("result.exit_code", "must be an integer or null")
    for key in ("reason", "message"):
        if result.get(key) is not None and not isinstance(result[key], str):
            bad(f"result.{key}", "must be a string")
    if isinstance(result.get("reason"), str) and len(result["reason"]) > 64:  # the column's width
        bad("result.reason", "must be at most 64 characters")
    outputs = result.get("outputs") or []
    if not isinstance(outputs, list):
        bad("result.outputs", "must be a list")
        return
    for i, item in enumerate(outputs):
        if (problem := output_record_problem(item)) is not None:
            field, message = problem
            bad(f"result.outputs[{i}]" + (f".{field}" if field else ""), message)
