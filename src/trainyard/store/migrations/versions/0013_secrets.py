"""secrets: a team's values for its jobs' environment, encrypted

Revision ID: 0013_secrets
Revises: 0012_sweeps
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_secrets"
down_revision = "0012_sweeps"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "secrets",
        sa.Column("team", sa.String(63), primary_key=True),
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("sealed", sa.Text(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("updated_by", sa.String(63)),
    )


def downgrade() -> None:
    op.drop_table("secrets")
