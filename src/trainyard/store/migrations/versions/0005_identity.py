"""users, teams, API tokens (as sha256 hashes), the audit log; owner and team of jobs and pipeline runs

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "users",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("admin", sa.Boolean, nullable=False),
        sa.Column("os_user", sa.String(63)),
        sa.Column("disabled", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "memberships",
        sa.Column("user", sa.String(63), sa.ForeignKey("users.name"), primary_key=True),
        sa.Column("team", sa.String(63), sa.ForeignKey("teams.name"), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(24), primary_key=True),
        sa.Column("user", sa.String(63), sa.ForeignKey("users.name"), nullable=False, index=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False, unique=True),  # the one lookup of every request
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_used_at", sa.Float),
        sa.Column("expires_at", sa.Float),
        sa.Column("revoked_at", sa.Float),
    )
    op.create_table(
        "audit",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("at", sa.Float, nullable=False, index=True),
        sa.Column("user", sa.String(63), nullable=False, index=True),
        sa.Column("source", sa.String(255)),
        sa.Column("action", sa.String(63), nullable=False),
        sa.Column("target", sa.String(255)),
        sa.Column("detail", sa.JSON),
    )
    # nullable: jobs and runs from before this belong to the server's own (local admin) identity
    for table in ("jobs", "pipeline_runs"):
        with op.batch_alter_table(table) as b:
            b.add_column(sa.Column("owner", sa.String(63)))
            b.add_column(sa.Column("team", sa.String(63)))
            b.create_index(f"ix_{table}_team", ["team"])
            b.create_index(f"ix_{table}_owner", ["owner"])


def downgrade() -> None:
    for table in ("jobs", "pipeline_runs"):
        with op.batch_alter_table(table) as b:
            b.drop_index(f"ix_{table}_owner")
            b.drop_index(f"ix_{table}_team")
            b.drop_column("team")
            b.drop_column("owner")
    for table in ("audit", "api_tokens", "memberships", "users", "teams"):
        op.drop_table(table)
