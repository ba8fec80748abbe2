"""webhooks: users' subscriptions to the server's webhooks, the deliveries owed, the events read

Revision ID: 0015_webhooks
Revises: 0014_schedules
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_webhooks"
down_revision = "0014_schedules"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("owner", sa.String(63), nullable=False, index=True),
        sa.Column("webhook", sa.String(63), nullable=False),
        sa.Column("on", sa.JSON(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("team", sa.String(63)),
        sa.Column("queue", sa.String(63)),
        sa.Column("name", sa.String(63)),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "deliveries",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("subscription_id", sa.String(40), nullable=False),
        sa.Column("webhook", sa.String(63), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("object_id", sa.String(40), nullable=False),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", sa.Float()),
        sa.Column("last_error", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("sent_at", sa.Float()),
        sa.UniqueConstraint("subscription_id", "event_id", name="uq_deliveries_subscription_event"),
    )
    op.create_index("ix_deliveries_next_at", "deliveries", ["next_at"])
    op.create_index("ix_deliveries_subscription_id", "deliveries", ["subscription_id", "id"])
    op.create_table(
        "event_cursors",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("event_cursors")
    op.drop_table("deliveries")
    op.drop_table("subscriptions")
