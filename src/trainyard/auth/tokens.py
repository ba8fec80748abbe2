"""Tokens are kept as their SHA-256 and compared in constant time; the plaintext is never stored by the server.

Tokens are random and long, so no salt or slow hash is needed. Each attempt gets
one of its own when it is admitted (and a fresh one when it must be launched
again after a restart): its launcher reads it from its ``launch.json``, the
database keeps only the hash, and it is good for reports of that attempt only,
never for the API.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import NamedTuple


class AttemptToken(NamedTuple):
    secret: str  # goes to the launcher, once
    hash: str    # goes to the store (attempts.token_hash)


def new_attempt_token() -> AttemptToken:
    secret = secrets.token_urlsafe(32)
    return AttemptToken(secret, token_hash(secret))


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def matches(sent: str | None, expected_sha256: str) -> bool:
    return sent is not None and hmac.compare_digest(token_hash(sent), expected_sha256)


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None for any other form."""
    scheme, _, token = (header or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token and " " not in token else None
