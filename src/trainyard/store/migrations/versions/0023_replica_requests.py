"""What a running replica's launcher is asked to do on its node (dump its stacks, run a command), and its answers

Revision ID: 0023_replica_requests
Revises: 0022_job_labels
"""

import sqlalchemy as sa
from alembic import op

revision = "0023_replica_requests"
down_revision = "0022_job_labels"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "replica_requests",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("attempt_id", sa.String(48), nullable=False),
        sa.Column("replica", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(255)),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("requested_at", sa.Float(), nullable=False),
        sa.Column("requested_by", sa.String(63)),
        sa.Column("locals", sa.Boolean(), nullable=False),
        sa.Column("native", sa.Boolean(), nullable=False),
        sa.Column("argv", sa.JSON()),
        sa.Column("timeout", sa.Float()),
        sa.Column("answered_at", sa.Float()),
        sa.Column("text", sa.Text()),
        sa.Column("error", sa.Text()),
        sa.Column("exit_code", sa.Integer()),
    )
    op.create_index("ix_replica_requests_job_id", "replica_requests", ["job_id"])
    op.create_index("ix_replica_requests_pending", "replica_requests", ["answered_at", "requested_at"])


def downgrade() -> None:
    op.drop_index("ix_replica_requests_pending", table_name="replica_requests")
    op.drop_index("ix_replica_requests_job_id", table_name="replica_requests")
    op.drop_table("replica_requests")
