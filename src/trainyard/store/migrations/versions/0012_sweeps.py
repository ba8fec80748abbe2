"""sweeps: hyperparameter searches and their trials

Revision ID: 0012_sweeps
Revises: 0011_metric_series
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_sweeps"
down_revision = "0011_metric_series"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("seq", sa.BigInteger(), nullable=False, unique=True),
        sa.Column("name", sa.String(63), nullable=False, index=True),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("snapshot", sa.String(80)),
        sa.Column("owner", sa.String(63), index=True),
        sa.Column("team", sa.String(63), index=True),
        sa.Column("reason", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float()),
    )
    op.create_table(
        "sweep_trials",
        sa.Column("sweep_id", sa.String(40), primary_key=True),
        sa.Column("number", sa.Integer(), primary_key=True),
        sa.Column("job_id", sa.String(40), nullable=False, index=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("value", sa.Float()),
        sa.Column("step", sa.BigInteger()),
        sa.Column("reported", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float()),
    )


def downgrade() -> None:
    op.drop_table("sweep_trials")
    op.drop_table("sweeps")
