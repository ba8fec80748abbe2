"""How a number someone gave is refused: the whole range it may take, said alike by the API (a query parameter,
``api/request_errors.py``) and the CLI (a flag typer refused, ``cli/toplevel.py``). Standard library only: the
CLI reads it on an error's path."""

from __future__ import annotations

import math
import typing
from typing import Any

# pydantic's error types for a value that is no number, or one out of its range
NUMBER_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number",
                           "float_parsing", "float_type", "int_parsing", "int_type", "int_from_float"})
BOUNDS = {"ge": "at least {}", "gt": "above {}", "le": "at most {}", "lt": "below {}"}


def must_be(whole: bool, bounds: dict[str, Any]) -> str:
    """``must be a finite number from 0 to 604800``: ``bounds`` holds pydantic's ``ge``/``gt``/``le``/``lt``."""
    said = " and ".join(BOUNDS[k].format(shown(bounds[k])) for k in BOUNDS if bounds.get(k) is not None)
    if bounds.get("ge") is not None and bounds.get("le") is not None:
        said = f"from {shown(bounds['ge'])} to {shown(bounds['le'])}"
    kind = "a whole number" if whole else "a finite number"
    return f"must be {kind}{' ' + said if said else ''}"


def is_int(annotation: Any) -> bool:
    """Whether a field of ``annotation`` (``int``, ``int | None``) takes whole numbers only."""
    kinds = typing.get_args(annotation) or (annotation,)
    return int in kinds and float not in kinds


def shown(value: Any) -> str:
    """604800, not 604800.0: a bound as the user would write it."""
    return str(int(value)) if isinstance(value, float) and math.isfinite(value) and value.is_integer() else str(value)
