"""Each service replica attempt's own token (sealed with the servers' secrets key): the /serve/ proxy sends it, and
a replica refuses requests without it, where any process on the node could connect to its port

Revision ID: 0027_service_replica_token
Revises: 0026_dask_cluster_tls
"""

import sqlalchemy as sa
from alembic import op

revision = "0027_service_replica_token"
down_revision = "0026_dask_cluster_tls"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("service_replicas") as b:
        b.add_column(sa.Column("token", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("service_replicas") as b:
        b.drop_column("token")
