"""Secrets: values a team's jobs read from their environment, never written in a spec, a log or a file.

A secret belongs to a team (or to no team: the admins' own jobs on the default
queue). Its value is set once, stored encrypted, and is never shown again by the
API: what reads it is the launcher of a job of that team that names it in its
spec's ``secrets:``, over its attempt's own credential, at the attempt's start.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from trainyard.spec.job import Strict

MAX_VALUE = 64 * 1024  # bytes of one value: a token, a key, a small credentials file


class SecretValue(Strict):
    """The body of ``PUT /api/v1/secrets/NAME``."""

    value: str = Field(description="the secret's value; never shown again")

    @field_validator("value")
    @classmethod
    def _value(cls, v: str) -> str:
        if not v:
            raise ValueError("a secret's value must not be empty")
        if len(v.encode("utf-8", "surrogatepass")) > MAX_VALUE:
            raise ValueError(f"a secret's value is at most {MAX_VALUE // 1024} KiB")
        return v


class SecretInfo(BaseModel):
    """What anyone of the team may know of a secret: its name and history, never its value."""

    name: str
    team: str | None
    created_at: float
    updated_at: float
    updated_by: str | None
    length: int = Field(description="characters in the value (the logs show this many '*' where it was printed)")
