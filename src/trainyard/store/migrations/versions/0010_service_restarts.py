"""service restarts: how many crashed replicas a service has replaced (the services page and `service show`)

Revision ID: 0010_service_restarts
Revises: 0009_services
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_service_restarts"
down_revision = "0009_services"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("services") as batch:
        batch.add_column(sa.Column("restarts", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("services") as batch:
        batch.drop_column("restarts")
