"""What deleted jobs used: one row per attempt, so that ``trainyard usage`` still counts the hours of jobs whose
records were deleted (``trainyard rm``, the ``jobs`` retention), and the counters and admission waits of
``/metrics`` never go down (Prometheus would read a drop as a reset, and a rate as a burst).

Declared on the same ``Base`` as :mod:`trainyard.store.tables`; the schema is migration 0019's.
"""

from __future__ import annotations

from sqlalchemy import JSON, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trainyard.store.tables import Base


class UsageArchive(Base):
    __tablename__ = "usage_archive"
    attempt_id: Mapped[str] = mapped_column(String(48), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(40))
    queue: Mapped[str] = mapped_column(String(63))
    queue_team: Mapped[str | None] = mapped_column(String(63))  # what usage groups by: the queue's team then
    team: Mapped[str | None] = mapped_column(String(63))  # the job's: who may see the hours (as a listing)
    owner: Mapped[str | None] = mapped_column(String(63))
    resources: Mapped[dict] = mapped_column(JSON)  # the spec's, as stored
    replicas: Mapped[int] = mapped_column(Integer)
    node: Mapped[str | None] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float] = mapped_column(Float)
    preempted_by: Mapped[str | None] = mapped_column(String(40))  # as the attempt's: counted as a preemption
    wait: Mapped[float | None] = mapped_column(Float)  # as the attempt's: a first admission's wait
    __table_args__ = (Index("ix_usage_archive_ended_at", "ended_at"),)
