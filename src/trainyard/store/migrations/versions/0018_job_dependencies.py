"""job dependencies: a pending job waiting for others to end is out of the scheduler's line

Revision ID: 0018_job_dependencies
Revises: 0017_sweep_cursors
"""

import sqlalchemy as sa
from alembic import op

revision = "0018_job_dependencies"
down_revision = "0017_sweep_cursors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN, never a batch: SQLite's batch mode copies the table, and the copy has none of the
    # triggers that write the jobs' events (migration 0007)
    op.add_column("jobs", sa.Column("blocked", sa.Boolean(), nullable=False, server_default=sa.false()))
    # partial: only the blocked rows are in it, so the status changes of every other job never touch it
    op.create_index("ix_jobs_blocked", "jobs", ["status"], sqlite_where=sa.text("blocked = 1"),
                    postgresql_where=sa.text("blocked"))


def downgrade() -> None:
    op.drop_index("ix_jobs_blocked", "jobs")
    op.drop_column("jobs", "blocked")  # SQLite 3.35+ drops a column in place
