"""sweep cursors: how far the leader's retention sweeps have come; attempts by when they ended

Revision ID: 0017_sweep_cursors
Revises: 0016_node_cordons
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_sweep_cursors"
down_revision = "0016_node_cordons"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweep_cursors",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("at", sa.Float(), nullable=False),
    )
    op.create_index("ix_attempts_ended_at", "attempts", ["ended_at"])


def downgrade() -> None:
    op.drop_index("ix_attempts_ended_at", "attempts")
    op.drop_table("sweep_cursors")
