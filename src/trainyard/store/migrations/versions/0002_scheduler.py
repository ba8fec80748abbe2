"""queues; a pending job's position; who preempted an attempt and whether it borrowed

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "queues",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("team", sa.String(63), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("cpu", sa.Float()),
        sa.Column("memory", sa.BigInteger()),
        sa.Column("gpus", sa.JSON()),
        sa.Column("max_running", sa.Integer()),
        sa.Column("borrowing", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),  # "file" (server config) or "api"
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    with op.batch_alter_table("jobs") as b:
        b.add_column(sa.Column("position", sa.Integer()))
    with op.batch_alter_table("attempts") as b:
        b.add_column(sa.Column("preempted_by", sa.String(40)))
        b.add_column(sa.Column("borrowed", sa.Boolean()))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as b:
        b.drop_column("borrowed")
        b.drop_column("preempted_by")
    with op.batch_alter_table("jobs") as b:
        b.drop_column("position")
    op.drop_table("queues")
