"""Labels: ``key: value`` pairs a user tags jobs with (``experiment: baseline``), listed and filtered on.

Shaped as Kubernetes labels are, so a key or value copied from one fits the other: a key is a name of up
to 63 characters (letters, digits, ``.``, ``_``, ``-``; a letter or digit first), with an optional prefix
and ``/`` (``team.example.com/owner``); a value is at most 63 such characters, or empty.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

MAX_LABELS = 32
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?"
KEY = re.compile(rf"^(?:[a-z0-9](?:[a-z0-9.-]{{0,251}}[a-z0-9])?/)?{_NAME}$")
VALUE = re.compile(rf"^(?:{_NAME})?$")


def check_key(k: str) -> str:
    if not KEY.match(k):
        raise ValueError(f"label key {k!r}: up to 63 letters, digits, '.', '_' or '-', starting and ending with a "
                         "letter or digit, after an optional 'prefix/'")
    return k


def check_value(v: str) -> str:
    if not VALUE.match(v):
        raise ValueError(f"label value {v!r}: empty, or up to 63 letters, digits, '.', '_' or '-', starting and "
                         "ending with a letter or digit")
    return v


LabelKey = Annotated[str, AfterValidator(check_key)]
LabelValue = Annotated[str, AfterValidator(check_value)]

