"""Node state the server keeps: cordons (nodes an admin took out of scheduling), and how far the sweeps of
what ended attempts left on nodes have come.

Declared on the same ``Base`` as :mod:`trainyard.store.tables`; the schema is migrations 0016's and 0017's. A
cordon outlives its node: one that leaves the cluster and comes back is still cordoned, as in Slurm.
"""

from __future__ import annotations

from sqlalchemy import Float, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trainyard.store.tables import Base


class NodeCordon(Base):
    __tablename__ = "node_cordons"
    node: Mapped[str] = mapped_column(String(253), primary_key=True)  # a host name's longest
    reason: Mapped[str | None] = mapped_column(Text)
    by: Mapped[str | None] = mapped_column(String(63))
    at: Mapped[float] = mapped_column(Float)
    drained_at: Mapped[float | None] = mapped_column(Float)  # when a drain stopped its attempts; None: cordon only


class SweepCursor(Base):
    """How far a retention sweep has come: everything that ended at or before ``at`` was swept."""

    __tablename__ = "sweep_cursors"
    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    at: Mapped[float] = mapped_column(Float)
