"""Who may do what: teams, users and their memberships, API tokens, the audit log, and teams' secrets.

Declared on the same ``Base`` as :mod:`trainyard.store.tables` (so in its metadata once this module is
imported: :mod:`trainyard.store` does); the schema itself is the Alembic migrations'.
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trainyard.store.tables import Base


class Team(Base):
    __tablename__ = "teams"
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    created_at: Mapped[float] = mapped_column(Float)


class User(Base):
    __tablename__ = "users"
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    admin: Mapped[bool] = mapped_column(Boolean)
    # the Unix account its jobs run as (local engine, root server): one user's (0030's unique index), NULLs many
    os_user: Mapped[str | None] = mapped_column(String(63), unique=True, index=True)
    disabled: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[float] = mapped_column(Float)


class Membership(Base):
    __tablename__ = "memberships"
    user: Mapped[str] = mapped_column(ForeignKey("users.name"), primary_key=True)
    team: Mapped[str] = mapped_column(ForeignKey("teams.name"), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))  # maintainer, member or viewer (trainyard.auth.permissions)


class ApiToken(Base):
    """A user's API token, kept only as its sha256 (``hash``, unique: the one lookup of every request)."""

    __tablename__ = "api_tokens"
    id: Mapped[str] = mapped_column(String(24), primary_key=True)
    user: Mapped[str] = mapped_column(ForeignKey("users.name"), index=True)
    name: Mapped[str] = mapped_column(String(63))
    hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    last_used_at: Mapped[float | None] = mapped_column(Float)  # refreshed at most once a minute
    expires_at: Mapped[float | None] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float)


class AuditEntry(Base):
    """One change: who, when, from where, what."""

    __tablename__ = "audit"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Float, index=True)
    user: Mapped[str] = mapped_column(String(63), index=True)
    source: Mapped[str | None] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(63))
    target: Mapped[str | None] = mapped_column(String(255))
    detail: Mapped[dict | None] = mapped_column(JSON)


class Secret(Base):
    """A team's secret, its value encrypted with the servers' key (``services/secret_box.py``). ``team`` is ""
    for secrets of no team (what the admins' own jobs on the default queue read)."""

    __tablename__ = "secrets"
    team: Mapped[str] = mapped_column(String(63), primary_key=True)
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    sealed: Mapped[str] = mapped_column(Text)  # the value, encrypted and authenticated (Fernet)
    length: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str | None] = mapped_column(String(63))
