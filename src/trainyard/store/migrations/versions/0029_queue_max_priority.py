"""A queue's max_priority: the highest priority a non-admin's job on it may have, an admin's to set (None: normal)

Revision ID: 0029_queue_max_priority
Revises: 0028_sqlite_autoincrement
"""

import sqlalchemy as sa
from alembic import op

revision = "0029_queue_max_priority"
down_revision = "0028_sqlite_autoincrement"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("queues") as b:
        b.add_column(sa.Column("max_priority", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("queues") as b:
        b.drop_column("max_priority")
