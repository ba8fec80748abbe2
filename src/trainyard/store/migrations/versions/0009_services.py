"""services: long-running jobs with a port, and their replica jobs

Revision ID: 0009_services
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_services"
down_revision = "0008_ui_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "services",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("seq", sa.BigInteger(), nullable=False, unique=True),
        sa.Column("name", sa.String(63), nullable=False, index=True),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("queue", sa.String(63), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("snapshot", sa.String(100)),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("wanted", sa.Integer(), nullable=False),
        sa.Column("demand_at", sa.Float()),
        sa.Column("owner", sa.String(63), index=True),
        sa.Column("team", sa.String(63), index=True),
        sa.Column("reason", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float()),
    )
    op.create_table(
        "service_replicas",
        sa.Column("job_id", sa.String(40), primary_key=True),
        sa.Column("service_id", sa.String(40), nullable=False, index=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("address", sa.Text()),
        sa.Column("ready", sa.Boolean(), nullable=False),
        sa.Column("draining_since", sa.Float()),
        sa.Column("created_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("service_replicas")
    op.drop_table("services")
