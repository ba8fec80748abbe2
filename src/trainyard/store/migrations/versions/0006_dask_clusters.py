"""on-demand Dask clusters

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dask_clusters",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("seq", sa.BigInteger(), nullable=False, unique=True),
        sa.Column("name", sa.String(63), nullable=False, index=True),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("queue", sa.String(63), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("workers", sa.Integer(), nullable=False),
        sa.Column("adapt_min", sa.Integer()),
        sa.Column("adapt_max", sa.Integer()),
        sa.Column("scheduler_job", sa.String(40)),
        sa.Column("worker_jobs", sa.JSON(), nullable=False),
        sa.Column("address", sa.Text()),
        sa.Column("dashboard", sa.Text()),
        sa.Column("owner_job", sa.String(40), index=True),
        sa.Column("owner", sa.String(63), index=True),  # who created it (None: the server's own identity)
        sa.Column("team", sa.String(63), index=True),
        sa.Column("reason", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float()),
    )


def downgrade() -> None:
    op.drop_table("dask_clusters")
