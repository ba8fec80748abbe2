"""Who uploaded each code snapshot: a snapshot is named by its content's digest, and the digest alone must not
let another team read or run the code (trainyard.services.snapshots); jobs found by their snapshot

Revision ID: 0025_snapshot_owners
Revises: 0024_labels_rev
"""

import sqlalchemy as sa
from alembic import op

revision = "0025_snapshot_owners"
down_revision = "0024_labels_rev"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "snapshot_owners",
        sa.Column("digest", sa.String(100), primary_key=True),
        sa.Column("user", sa.String(63), primary_key=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_jobs_snapshot", "jobs", ["snapshot"])


def downgrade() -> None:
    op.drop_index("ix_jobs_snapshot", table_name="jobs")
    op.drop_table("snapshot_owners")
