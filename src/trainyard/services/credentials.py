"""Per-attempt credentials: what a launcher shows when it reports.

Each attempt gets a random token when it is admitted (and a fresh one when it
must be launched again after a restart). The launcher reads it from its
``launch.json``; the database keeps only its sha256, so a read of the
database (or of a backup) gives no way to report for any attempt. A token
is good for its own attempt only, never for the API.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import NamedTuple


class AttemptToken(NamedTuple):
    secret: str  # goes to the launcher, once
    hash: str    # goes to the store (attempts.token_hash)


def new_attempt_token() -> AttemptToken:
    secret = secrets.token_urlsafe(32)
    return AttemptToken(secret, token_hash(secret))


def token_hash(secret: str) -> str:
    """sha256 hex of a token: tokens are random and long, so no salt or slow hash is needed."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None when there is none."""
    scheme, _, value = (authorization or "").strip().partition(" ")
    value = value.strip()
    return value if scheme.lower() == "bearer" and value else None
