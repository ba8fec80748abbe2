"""Each Dask cluster's own TLS identity (its CA and certificates, sealed with the servers' secrets key): its
scheduler and workers accept only peers holding one, where any process on the node could run code on them

Revision ID: 0026_dask_cluster_tls
Revises: 0025_snapshot_owners
"""

import sqlalchemy as sa
from alembic import op

revision = "0026_dask_cluster_tls"
down_revision = "0025_snapshot_owners"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("dask_clusters") as b:
        b.add_column(sa.Column("tls", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dask_clusters") as b:
        b.drop_column("tls")
