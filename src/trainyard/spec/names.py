"""Names of things (jobs, queues, teams, users, clusters, sweeps, secrets): safe in paths, URLs and labels."""

from __future__ import annotations

import re

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def check_name(v: str | None) -> str | None:
    """A name as :data:`NAME` allows (whole: ``$`` alone would let a trailing newline through)."""
    if v is not None and not NAME.fullmatch(v):
        raise ValueError("use letters, digits, '.', '_' or '-' (at most 63, starting with a letter or digit)")
    return v
