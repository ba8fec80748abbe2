"""Requests for a running job's stacks (``trainyard stack``) and the launchers' answers (migration 0023).

Declared on the same ``Base`` as :mod:`trainyard.store.tables`. A row is a request until its launcher answers
(``answered_at``); one never answered is read as expired after :data:`trainyard.store.stacks.EXPIRE` seconds.
Deleted with their job, and only the newest few per job are kept.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trainyard.store.tables import Base


class StackDump(Base):
    __tablename__ = "stack_dumps"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    attempt_id: Mapped[str] = mapped_column(String(48))
    replica: Mapped[int] = mapped_column(Integer)
    node: Mapped[str | None] = mapped_column(String(255))
    requested_at: Mapped[float] = mapped_column(Float)
    requested_by: Mapped[str | None] = mapped_column(String(63))
    locals: Mapped[bool] = mapped_column(Boolean, default=False)  # py-spy's --locals
    native: Mapped[bool] = mapped_column(Boolean, default=False)  # and --native
    answered_at: Mapped[float | None] = mapped_column(Float)
    text: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    # the launchers' reports look for unanswered requests (a few rows at most)
    __table_args__ = (Index("ix_stack_dumps_pending", "answered_at", "requested_at"),)
