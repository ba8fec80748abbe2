"""deleting jobs: what their attempts used is kept for the usage report and /metrics

Revision ID: 0019_usage_archive
Revises: 0018_job_dependencies
"""

import sqlalchemy as sa
from alembic import op

revision = "0019_usage_archive"
down_revision = "0018_job_dependencies"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_archive",
        sa.Column("attempt_id", sa.String(48), primary_key=True),
        sa.Column("job_id", sa.String(40), nullable=False),
        sa.Column("queue", sa.String(63), nullable=False),
        sa.Column("queue_team", sa.String(63)),
        sa.Column("team", sa.String(63)),
        sa.Column("owner", sa.String(63)),
        sa.Column("resources", sa.JSON(), nullable=False),
        sa.Column("replicas", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(255)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=False),
        sa.Column("preempted_by", sa.String(40)),
        sa.Column("wait", sa.Float()),
    )
    op.create_index("ix_usage_archive_ended_at", "usage_archive", ["ended_at"])


def downgrade() -> None:
    op.drop_index("ix_usage_archive_ended_at", "usage_archive")
    op.drop_table("usage_archive")
