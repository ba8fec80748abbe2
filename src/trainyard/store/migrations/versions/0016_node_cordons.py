"""node cordons: nodes an admin took out of scheduling

Revision ID: 0016_node_cordons
Revises: 0015_webhooks
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_node_cordons"
down_revision = "0015_webhooks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "node_cordons",
        sa.Column("node", sa.String(253), primary_key=True),
        sa.Column("reason", sa.Text()),
        sa.Column("by", sa.String(63)),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("drained_at", sa.Float()),
    )


def downgrade() -> None:
    op.drop_table("node_cordons")
