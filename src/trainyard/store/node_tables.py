"""Nodes an admin took out of scheduling: cordoned (no new attempts) or drained (and their attempts requeued).

Declared on the same ``Base`` as :mod:`trainyard.store.tables`; the schema is migration 0016's. A node's
row outlives the node: one that leaves the cluster and comes back is still cordoned, as in Slurm.
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
