"""Jobs' labels in a table of their own, indexed by key and value: a label filter no longer reads every spec

Revision ID: 0022_job_labels
Revises: 0021_subscription_labels
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0022_job_labels"
down_revision = "0021_subscription_labels"
branch_labels = None
depends_on = None

BATCH = 5_000


def upgrade() -> None:
    table = op.create_table(
        "job_labels",
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id"), primary_key=True),
        sa.Column("key", sa.String(317), primary_key=True),
        sa.Column("value", sa.String(63), nullable=False),
    )
    op.create_index("ix_job_labels_key_value", "job_labels", ["key", "value"])
    # the labels of the jobs already there, from their specs, a batch at a time in submit order
    jobs = sa.table("jobs", sa.column("id"), sa.column("seq"), sa.column("spec"))
    conn, after = op.get_bind(), 0
    while rows := conn.execute(sa.select(jobs.c.seq, jobs.c.id, sa.cast(jobs.c.spec, sa.Text))
                               .where(jobs.c.seq > after).order_by(jobs.c.seq).limit(BATCH)).all():
        labelled = [{"job_id": job_id, "key": k, "value": v} for _, job_id, spec in rows
                    for k, v in ((json.loads(spec) or {}).get("labels") or {}).items()]
        if labelled:
            op.bulk_insert(table, labelled)
        after = rows[-1][0]


def downgrade() -> None:
    op.drop_index("ix_job_labels_key_value", table_name="job_labels")
    op.drop_table("job_labels")
