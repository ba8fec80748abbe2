"""jobs, attempts and their replicas, log chunks, metrics, artifacts

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("seq", sa.BigInteger(), nullable=False, unique=True),
        sa.Column("name", sa.String(63), nullable=False, index=True),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("queue", sa.String(63), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("snapshot", sa.String(100)),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("not_before", sa.Float()),
        sa.Column("reason", sa.Text()),
    )
    op.create_table(
        "attempts",
        sa.Column("id", sa.String(48), primary_key=True),
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id"), nullable=False, index=True),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("node", sa.String(255)),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.Column("handle", sa.JSON(), nullable=False),
        sa.Column("exit_code", sa.Integer()),
        sa.Column("reason", sa.String(64)),
        sa.Column("message", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float()),
        sa.Column("ended_at", sa.Float()),
        sa.Column("last_contact_at", sa.Float()),
        sa.Column("stop_reason", sa.String(255)),
        sa.UniqueConstraint("job_id", "number", name="uq_attempts_job_number"),
    )
    op.create_table(
        "replicas",
        sa.Column("attempt_id", sa.String(48), sa.ForeignKey("attempts.id"), primary_key=True),
        sa.Column("index", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("exit_code", sa.Integer()),
        sa.Column("reason", sa.String(64)),
        sa.Column("message", sa.Text()),
        sa.Column("started_at", sa.Float()),
        sa.Column("ended_at", sa.Float()),
        sa.Column("last_contact_at", sa.Float()),
        sa.Column("log_size", sa.BigInteger(), nullable=False),
        sa.Column("metrics_offset", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "log_chunks",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(40), nullable=False),
        sa.Column("attempt_id", sa.String(48), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("replica", sa.Integer(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    op.create_index("ix_log_chunks_job_id_id", "log_chunks", ["job_id", "id"])
    op.create_table(
        "metrics",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(40), nullable=False, index=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("replica", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer()),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
    )
    op.create_table(
        "artifacts",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(40), nullable=False, index=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.String(80), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    for table in ("artifacts", "metrics", "log_chunks", "replicas", "attempts", "jobs"):
        op.drop_table(table)
