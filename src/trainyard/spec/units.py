"""Kubernetes-style quantities: ``512Mi``, ``4Gi``, ``1.5G``, ``500m`` CPU."""

from __future__ import annotations

import re

_SUFFIX = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_memory(value: str | int | float) -> int:
    """Bytes from ``4Gi``, ``512Mi``, ``2G`` or a plain number of bytes."""
    if isinstance(value, bool):
        raise ValueError("memory must be a quantity such as 512Mi or 4Gi")
    if isinstance(value, (int, float)):
        number, suffix = float(value), ""
    else:
        m = _QUANTITY.match(value)
        if not m:
            raise ValueError(f"{value!r} is not a memory quantity; use e.g. 512Mi, 4Gi or 2G")
        number, suffix = float(m.group(1)), m.group(2)
    if suffix not in _SUFFIX:
        raise ValueError(f"unknown unit {suffix!r} in {value!r}; use one of Ki, Mi, Gi, Ti, k, M, G, T")
    if number < 0:
        raise ValueError("memory must not be negative")
    return int(number * _SUFFIX[suffix])


def parse_cpu(value: str | int | float) -> float:
    """Cores from ``2``, ``0.5`` or ``500m``."""
    if isinstance(value, bool):
        raise ValueError("cpu must be a number of cores such as 2, 0.5 or 500m")
    if isinstance(value, str):
        v = value.strip()
        try:
            value = float(v[:-1]) / 1000 if v.endswith("m") else float(v)
        except ValueError:
            raise ValueError(f"{value!r} is not a CPU quantity; use e.g. 2, 0.5 or 500m") from None
    if value < 0:
        raise ValueError("cpu must not be negative")
    return float(value)


def format_memory(n: int | None) -> str:
    if n is None:
        return "-"
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        if n >= _SUFFIX[suffix]:
            return f"{n / _SUFFIX[suffix]:.3g}{suffix}"
    return str(n)


def parse_duration(value: str | int | float) -> float:
    """Seconds from ``90``, ``30s``, ``5m``, ``2h``, ``1d``."""
    if isinstance(value, bool):
        raise ValueError("duration must be seconds or e.g. 30s, 5m, 2h")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        m = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|d)?\s*$", value)
        if not m:
            raise ValueError(f"{value!r} is not a duration; use seconds or e.g. 30s, 5m, 2h")
        seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}[m.group(2)]
    if seconds <= 0:
        raise ValueError("duration must be positive")
    return seconds
