"""Schedules (a job submitted on a cron) and their fires.

Declared on the same ``Base`` as :mod:`trainyard.store.tables` (in its metadata once this module is
imported: :mod:`trainyard.store` does); the schema itself is the Alembic migrations' (0014).
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Boolean, Float, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from trainyard.store.tables import Base


class Schedule(Base):
    __tablename__ = "schedules"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)  # creation order, also the listing order
    name: Mapped[str] = mapped_column(String(63))
    scope: Mapped[str] = mapped_column(String(63))  # its team, or "-" for none: names are unique per scope
    team: Mapped[str | None] = mapped_column(String(63), index=True)
    owner: Mapped[str | None] = mapped_column(String(63), index=True)  # who created it; its jobs are theirs
    spec: Mapped[dict] = mapped_column(JSON)  # the ScheduleSpec as created
    snapshot: Mapped[str | None] = mapped_column(String(80))  # its job's code, uploaded once
    workdirs: Mapped[dict | None] = mapped_column(JSON)  # a pipeline's: step workdir -> snapshot digest
    source: Mapped[str | None] = mapped_column(Text)  # a pipeline's file, for its runs' messages
    suspended: Mapped[bool] = mapped_column(Boolean)
    next_at: Mapped[float | None] = mapped_column(Float, index=True)  # the next fire; None while suspended
    last_at: Mapped[float | None] = mapped_column(Float)  # the latest fire's due time
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (UniqueConstraint("scope", "name", name="uq_schedules_scope_name"),)


class ScheduleRun(Base):
    """One fire of a schedule: the job it started, or why none was (skipped, missed, failed)."""

    __tablename__ = "schedule_runs"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    schedule_id: Mapped[str] = mapped_column(String(40))
    at: Mapped[float] = mapped_column(Float)  # when it was due
    fired_at: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(16))
    job_id: Mapped[str | None] = mapped_column(String(40))
    run_id: Mapped[str | None] = mapped_column(String(40))  # the pipeline run it started
    message: Mapped[str | None] = mapped_column(Text)
    manual: Mapped[bool] = mapped_column(Boolean)
    __table_args__ = (Index("ix_schedule_runs_schedule_id", "schedule_id", "id"),)
