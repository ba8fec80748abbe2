"""Jobs' labels may change after submit (``trainyard label``): a count of changes, so that a server's memory of
a spec (trainyard.store.cache) knows when another server changed it

Revision ID: 0024_labels_rev
Revises: 0023_replica_requests
"""

import sqlalchemy as sa
from alembic import op

revision = "0024_labels_rev"
down_revision = "0023_replica_requests"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("labels_rev", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("labels_rev")
