"""Requests for a running job's stacks, and the launchers' answers

Revision ID: 0023_stack_dumps
Revises: 0022_job_labels
"""

import sqlalchemy as sa
from alembic import op

revision = "0023_stack_dumps"
down_revision = "0022_job_labels"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stack_dumps",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("attempt_id", sa.String(48), nullable=False),
        sa.Column("replica", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(255)),
        sa.Column("requested_at", sa.Float(), nullable=False),
        sa.Column("requested_by", sa.String(63)),
        sa.Column("locals", sa.Boolean(), nullable=False),
        sa.Column("native", sa.Boolean(), nullable=False),
        sa.Column("answered_at", sa.Float()),
        sa.Column("text", sa.Text()),
        sa.Column("error", sa.Text()),
    )
    op.create_index("ix_stack_dumps_job_id", "stack_dumps", ["job_id"])
    op.create_index("ix_stack_dumps_pending", "stack_dumps", ["answered_at", "requested_at"])


def downgrade() -> None:
    op.drop_index("ix_stack_dumps_pending", table_name="stack_dumps")
    op.drop_index("ix_stack_dumps_job_id", table_name="stack_dumps")
    op.drop_table("stack_dumps")
