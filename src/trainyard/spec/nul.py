"""NUL characters: refused in what people write, replaced in what jobs print.

No command line, environment variable or file name can carry a NUL (``execve``
stops at it), and PostgreSQL's text columns refuse it: a NUL in a spec used to
fail the job later as "LostContact", and one in a job's log or metric name
failed every report of the job on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

NUL = "\x00"
REPLACEMENT = "\ufffd"  # what undecodable bytes of a log already become


def nul_at(value: Any) -> tuple[tuple[str | int, ...], str] | None:
    """Where in ``value`` (JSON-like data) the first string holding a NUL is, and that string; or None.
    A key holding one is named with ``\\x00`` written out."""
    # repr writes every NUL of a str, dict, list or tuple as \x00, in C: most data holds none, and walking it
    # in Python for each model of a spec (a before-validator on each) cost ~1.5 % of a burst's server CPU
    if isinstance(value, (dict, list, tuple)) and "\\x00" not in repr(value):
        return None
    if isinstance(value, str):
        return ((), value) if NUL in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and NUL in k:
                return (k.replace(NUL, "\\x00"),), k
            inner = nul_at(v)
            if inner is not None:
                return (k, *inner[0]), inner[1]
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            inner = nul_at(v)
            if inner is not None:
                return (i, *inner[0]), inner[1]
    return None


def refuse_nul(title: str, data: Any) -> Any:
    """``data`` as it is, or a ValidationError located at its first NUL (a before-validator's body)."""
    found = nul_at(data)
    if found is None:
        return data
    error = PydanticCustomError("nul_character", "contains a NUL character (\\x00), which no command line, "
                                "environment variable or file name can carry")
    raise ValidationError.from_exception_data(title, [InitErrorDetails(type=error, loc=found[0], input=found[1])])


def printable(text: str) -> str:
    """Text a job printed, fit for any database: each NUL as U+FFFD."""
    return text.replace(NUL, REPLACEMENT) if NUL in text else text
