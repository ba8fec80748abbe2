"""What a running replica's launcher is asked to do on its node, and its answers (migration 0023): dump its
command's stacks (``trainyard stack``, ``kind`` "stack") or run a command beside it (``trainyard exec``, "exec").

Declared on the same ``Base`` as :mod:`trainyard.store.tables`. A row is a request until its launcher answers
(``answered_at``); one never answered is read as expired (:func:`trainyard.store.replica_requests.expired`).
Deleted with their job, and only the newest few of each kind are kept per job.
"""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trainyard.store.tables import Base


class ReplicaRequest(Base):
    __tablename__ = "replica_requests"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    attempt_id: Mapped[str] = mapped_column(String(48))
    replica: Mapped[int] = mapped_column(Integer)
    node: Mapped[str | None] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(8))  # "stack" or "exec"
    requested_at: Mapped[float] = mapped_column(Float)
    requested_by: Mapped[str | None] = mapped_column(String(63))
    locals: Mapped[bool] = mapped_column(Boolean, default=False)  # a stack's: py-spy's --locals
    native: Mapped[bool] = mapped_column(Boolean, default=False)  # and --native
    argv: Mapped[list | None] = mapped_column(JSON)  # an exec's command
    timeout: Mapped[float | None] = mapped_column(Float)  # and the seconds it may take
    answered_at: Mapped[float | None] = mapped_column(Float)
    text: Mapped[str | None] = mapped_column(Text)  # the dump, or the command's output
    error: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None] = mapped_column(Integer)  # an exec's
    # the launchers' reports look for unanswered requests (a few rows at most)
    __table_args__ = (Index("ix_replica_requests_pending", "answered_at", "requested_at"),)
