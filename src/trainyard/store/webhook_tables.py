"""Subscriptions to webhooks, the deliveries they owe, and how far the events were read for them.

Declared on the same ``Base`` as :mod:`trainyard.store.tables` (in its metadata once this module is
imported); the schema itself is the Alembic migrations' (0015).
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Float, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from trainyard.store.tables import Base


class Subscription(Base):
    __tablename__ = "subscriptions"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner: Mapped[str] = mapped_column(String(63), index=True)
    webhook: Mapped[str] = mapped_column(String(63))
    on: Mapped[list] = mapped_column(JSON)  # succeeded, failed, cancelled
    kind: Mapped[str] = mapped_column(String(16))  # job or pipeline_run: whose ends
    scope: Mapped[str] = mapped_column(String(8))  # mine, team, all
    team: Mapped[str | None] = mapped_column(String(63))
    queue: Mapped[str | None] = mapped_column(String(63))
    name: Mapped[str | None] = mapped_column(String(63))  # a glob of job names
    labels: Mapped[str | None] = mapped_column(String(2000))  # a label selector of the jobs (0021)
    created_at: Mapped[float] = mapped_column(Float)


class Delivery(Base):
    """One event owed to one subscription's webhook: sent, retried with backoff, or given up on."""

    __tablename__ = "deliveries"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    subscription_id: Mapped[str] = mapped_column(String(40))
    webhook: Mapped[str] = mapped_column(String(63))
    event_id: Mapped[int] = mapped_column(BigInteger)  # the events row it tells of
    kind: Mapped[str] = mapped_column(String(16))
    object_id: Mapped[str] = mapped_column(String(40))  # the job's or pipeline run's id
    event: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(8))  # pending, sent, failed
    attempts: Mapped[int] = mapped_column(Integer)
    next_at: Mapped[float | None] = mapped_column(Float)  # when to try (again); None once sent or given up
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    sent_at: Mapped[float | None] = mapped_column(Float)
    __table_args__ = (UniqueConstraint("subscription_id", "event_id", name="uq_deliveries_subscription_event"),
                      Index("ix_deliveries_next_at", "next_at"),
                      Index("ix_deliveries_subscription_id", "subscription_id", "id"),
                      # a sender holds its delivery's id while it sends, and an unsubscribe may delete the row
                      # meanwhile: the id never given to another delivery, on SQLite too (migration 0028)
                      {"sqlite_autoincrement": True})


class Cursor(Base):
    """How far a reader of the events table got (``webhooks``: the last event turned into deliveries)."""

    __tablename__ = "event_cursors"
    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    event_id: Mapped[int] = mapped_column(BigInteger)
