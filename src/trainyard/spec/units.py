"""Kubernetes-style quantities (``512Mi``, ``4Gi``, ``1.5G``, ``500m`` CPU) and the bounds of every number.

Every number of a spec is finite and in a range that the store's columns, the
scheduler's sums and the OS's timers hold: one NaN or 1e23 accepted once would
break every listing, sort or row that meets it later. The annotated types below
carry those bounds, so a field states its range where it is declared.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import Field

INT32_MAX = 2**31 - 1  # priorities and counts are INTEGER columns: 32 bits on PostgreSQL
MAX_CPU = 1_000_000  # cores: far past any cluster
MAX_BYTES = 2**60  # 1024Pi: sums of many still fit the BIGINT memory columns
MAX_COUNT = 1_000_000  # GPUs, running jobs: far past any cluster
MAX_SECONDS = 10 * 365 * 86400  # ten years: past any job, inside what timers and datetimes accept

Cores = Annotated[float, Field(ge=0, le=MAX_CPU, allow_inf_nan=False)]
Bytes = Annotated[int, Field(ge=0, le=MAX_BYTES)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
Priority = Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX)]

_SUFFIX = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def _number(value: Any, what: str) -> float | int | str:
    """``value`` if it is a string or a finite number, else ValueError (which pydantic reports on the field)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{what}, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what}, not {value}")
    return value


def _float(text: str | int | float) -> float:
    """A finite float; ValueError for "nan", "inf", or an int or digits too big for a float."""
    try:
        number = float(text)
    except OverflowError:
        raise ValueError("too large") from None
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


def parse_memory(value: Any) -> int:
    """Bytes from ``4Gi``, ``512Mi``, ``2G`` or a plain number of bytes."""
    value = _number(value, "memory must be a quantity such as 512Mi or 4Gi")
    if isinstance(value, int):
        number, suffix = value, ""  # kept exact: a float would round a big one
    elif isinstance(value, float):
        number, suffix = value, ""
    else:
        m = _QUANTITY.match(value)
        if not m:
            raise ValueError(f"{value!r} is not a memory quantity; use e.g. 512Mi, 4Gi or 2G")
        try:
            number, suffix = _float(m.group(1)), m.group(2)
        except ValueError:
            raise ValueError("memory must be at most 1024Pi") from None
    if suffix not in _SUFFIX:
        raise ValueError(f"unknown unit {suffix!r} in {value!r}; use one of Ki, Mi, Gi, Ti, k, M, G, T")
    if number < 0:
        raise ValueError("memory must not be negative")
    if number * _SUFFIX[suffix] > MAX_BYTES:
        raise ValueError("memory must be at most 1024Pi")
    return int(number * _SUFFIX[suffix])


def parse_cpu(value: Any) -> float:
    """Cores from ``2``, ``0.5`` or ``500m``."""
    value = _number(value, "cpu must be a number of cores such as 2, 0.5 or 500m")
    try:
        if isinstance(value, str):
            v = value.strip()
            cores = _float(v[:-1]) / 1000 if v.endswith("m") else _float(v)
        else:
            cores = _float(value)
    except ValueError:
        if isinstance(value, str):
            raise ValueError(f"{value[:40]!r} is not a CPU quantity; use e.g. 2, 0.5 or 500m") from None
        raise ValueError(f"cpu must be at most {MAX_CPU} cores") from None
    if cores < 0:
        raise ValueError("cpu must not be negative")
    if cores > MAX_CPU:
        raise ValueError(f"cpu must be at most {MAX_CPU} cores")
    return cores


def format_memory(n: int | None) -> str:
    if n is None:
        return "-"
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        if n >= _SUFFIX[suffix]:
            return f"{n / _SUFFIX[suffix]:.3g}{suffix}"
    return str(n)


def parse_duration(value: Any, zero: bool = False) -> float:
    """Seconds from ``90``, ``30s``, ``5m``, ``2h``, ``1d``; 0 only with ``zero`` (a setting where 0 means off)."""
    value = _number(value, "duration must be seconds or e.g. 30s, 5m, 2h")
    too_long = f"duration must be at most {MAX_SECONDS // 86400} days"
    if isinstance(value, (int, float)):
        number, unit = value, None
    else:
        m = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|d)?\s*$", value)
        if not m:
            raise ValueError(f"{value!r} is not a duration; use seconds or e.g. 30s, 5m, 2h")
        number, unit = m.group(1), m.group(2)
    try:
        seconds = _float(number) * {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}[unit]
    except ValueError:
        raise ValueError(too_long) from None
    if seconds < 0 or (seconds == 0 and not zero):
        raise ValueError("duration must not be negative" if zero else "duration must be positive")
    if seconds > MAX_SECONDS:
        raise ValueError(too_long)
    return seconds
