"""ui indexes: the jobs listing sorted or filtered by name, status, queue, team or owner, newest first

Each single-column index becomes (column, seq): the same lookups, and a page in that column's order
(ties by submit order) is one index scan, not a sort of every matching job.

Revision ID: 0008_ui_indexes
Revises: 0007
"""

from alembic import op

revision = "0008_ui_indexes"
down_revision = "0007"
branch_labels = None
depends_on = None

_REPLACED = ("name", "status", "team", "owner")  # had a single-column index each


def upgrade() -> None:
    for column in _REPLACED:
        op.drop_index(f"ix_jobs_{column}", table_name="jobs")
    for column in (*_REPLACED, "queue"):
        op.create_index(f"ix_jobs_{column}_seq", "jobs", [column, "seq"])
    op.create_index("ix_jobs_created_at", "jobs", ["created_at"])  # a date range: read that range only


def downgrade() -> None:
    op.drop_index("ix_jobs_created_at", table_name="jobs")
    for column in (*_REPLACED, "queue"):
        op.drop_index(f"ix_jobs_{column}_seq", table_name="jobs")
    for column in _REPLACED:
        op.create_index(f"ix_jobs_{column}", "jobs", [column])
