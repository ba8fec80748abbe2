"""A subscription narrowed by a label selector of the jobs it hears of

Revision ID: 0021_subscription_labels
Revises: 0020_archive_counts
"""

import sqlalchemy as sa
from alembic import op

revision = "0021_subscription_labels"
down_revision = "0020_archive_counts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.add_column(sa.Column("labels", sa.String(2000), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("labels")
