"""attempts' launcher credential, stored as its sha256

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable: attempts admitted before this have none, and their reports are refused
    with op.batch_alter_table("attempts") as b:
        b.add_column(sa.Column("token_hash", sa.String(64)))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as b:
        b.drop_column("token_hash")
