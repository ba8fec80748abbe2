"""metric series: each point's number in its series (and steps past 2^31), per series how many came and which stay

A replica keeps evenly spaced points of each metric and its newest (trainyard.store.metric_series); the
index on the job's points grows to reach one series' points by number, which thinning deletes.

Revision ID: 0011_metric_series
Revises: 0010_service_restarts
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_metric_series"
down_revision = "0010_service_restarts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("metrics") as batch:
        batch.add_column(sa.Column("seq", sa.BigInteger(), nullable=True))
        batch.alter_column("step", type_=sa.BigInteger(), existing_type=sa.Integer())  # a step may count tokens
    op.drop_index("ix_metrics_job_id", table_name="metrics")
    op.create_index("ix_metrics_series", "metrics", ["job_id", "attempt", "replica", "name", "seq"])
    op.create_table(
        "metric_series",
        sa.Column("attempt_id", sa.String(48), primary_key=True),
        sa.Column("replica", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("received", sa.BigInteger(), nullable=False),
        sa.Column("stride", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("metric_series")
    op.drop_index("ix_metrics_series", table_name="metrics")
    op.create_index("ix_metrics_job_id", "metrics", ["job_id"])
    with op.batch_alter_table("metrics") as batch:
        batch.drop_column("seq")
        batch.alter_column("step", type_=sa.Integer(), existing_type=sa.BigInteger())
