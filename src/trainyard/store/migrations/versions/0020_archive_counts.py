"""/metrics' counts of deleted jobs' attempts, kept summed: a scrape reads a few rows, not the whole archive

Revision ID: 0020_archive_counts
Revises: 0019_usage_archive
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_archive_counts"
down_revision = "0019_usage_archive"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from trainyard.store.archive_counts import summed

    table = op.create_table(
        "archive_counts",
        sa.Column("queue", sa.String(63), primary_key=True),
        sa.Column("metric", sa.String(16), primary_key=True),  # ended, preempted, wait
        sa.Column("key", sa.String(32), primary_key=True),  # the reason's kind, or the wait's bucket
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.Float(), nullable=False),  # the waits' sum
    )
    # what was archived before (0019): summed once, as each delete sums its own from now on
    archive = sa.table("usage_archive", *[sa.column(c) for c in ("queue", "status", "reason", "preempted_by",
                                                                  "wait")])
    rows = op.get_bind().execute(sa.select(archive)).mappings().all()
    if rows:
        op.bulk_insert(table, summed(rows))


def downgrade() -> None:
    op.drop_table("archive_counts")
