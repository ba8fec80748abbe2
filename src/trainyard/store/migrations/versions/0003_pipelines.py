"""pipeline runs, their step instances, and step artifacts with lineage

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pipeline_runs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("seq", sa.BigInteger(), nullable=False, unique=True),
        sa.Column("name", sa.String(63), nullable=False, index=True),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("workdirs", sa.JSON(), nullable=False),
        sa.Column("source", sa.Text()),
        sa.Column("warnings", sa.JSON(), nullable=False),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float()),
    )
    op.create_table(
        "pipeline_steps",
        sa.Column("run_id", sa.String(40), sa.ForeignKey("pipeline_runs.id"), primary_key=True),
        sa.Column("name", sa.String(127), primary_key=True),
        sa.Column("step", sa.String(127), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer()),
        sa.Column("item", sa.JSON()),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("job", sa.JSON(), nullable=False),
        sa.Column("needs", sa.JSON(), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("cache", sa.Boolean(), nullable=False),
        sa.Column("workdir", sa.String(255), nullable=False),
        sa.Column("job_id", sa.String(40), index=True),
        sa.Column("jobs", sa.JSON(), nullable=False),
        sa.Column("cache_key", sa.String(80), index=True),
        sa.Column("cached_from", sa.String(40)),
        sa.Column("artifacts", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("started_at", sa.Float()),
        sa.Column("ended_at", sa.Float()),
    )
    op.create_table(
        "pipeline_artifacts",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("digest", sa.String(80), nullable=False, index=True),
        sa.Column("run_id", sa.String(40), nullable=False, index=True),
        sa.Column("step", sa.String(127), nullable=False),
        sa.Column("job_id", sa.String(40), nullable=False, index=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("output", sa.String(63), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("code", sa.String(100)),
        sa.Column("cache_key", sa.String(80)),
        sa.Column("created_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pipeline_artifacts")
    op.drop_table("pipeline_steps")
    op.drop_table("pipeline_runs")
