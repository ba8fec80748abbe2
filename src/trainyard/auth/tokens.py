"""Tokens are kept as their SHA-256 and compared in constant time; the plaintext is never stored by the server."""

from __future__ import annotations

import hashlib
import hmac


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def matches(sent: str | None, expected_sha256: str) -> bool:
    return sent is not None and hmac.compare_digest(token_hash(sent), expected_sha256)


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None for any other form."""
    scheme, _, token = (header or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token and " " not in token else None
