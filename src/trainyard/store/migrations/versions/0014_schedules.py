"""schedules: jobs submitted on a cron, and each fire's outcome

Revision ID: 0014_schedules
Revises: 0013_secrets
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_schedules"
down_revision = "0013_secrets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("seq", sa.BigInteger(), nullable=False, unique=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("scope", sa.String(63), nullable=False),
        sa.Column("team", sa.String(63), index=True),
        sa.Column("owner", sa.String(63), index=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("snapshot", sa.String(80)),
        sa.Column("workdirs", sa.JSON()),
        sa.Column("source", sa.Text()),
        sa.Column("suspended", sa.Boolean(), nullable=False),
        sa.Column("next_at", sa.Float(), index=True),
        sa.Column("last_at", sa.Float()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("scope", "name", name="uq_schedules_scope_name"),
    )
    op.create_table(
        "schedule_runs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("schedule_id", sa.String(40), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("fired_at", sa.Float(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("job_id", sa.String(40)),
        sa.Column("run_id", sa.String(40)),
        sa.Column("message", sa.Text()),
        sa.Column("manual", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_schedule_runs_schedule_id", "schedule_runs", ["schedule_id", "id"])


def downgrade() -> None:
    op.drop_table("schedule_runs")
    op.drop_table("schedules")
