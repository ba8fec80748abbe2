"""Alembic environment: runs on the connection handed over by ``trainyard.store.db.migrate``."""

from alembic import context
from sqlalchemy import create_engine

import trainyard.store.identity_tables  # noqa: F401  (its tables in Base.metadata)
import trainyard.store.schedule_tables  # noqa: F401  (likewise)
import trainyard.store.node_tables  # noqa: F401  (likewise)
import trainyard.store.webhook_tables  # noqa: F401  (likewise)
import trainyard.store.usage_tables  # noqa: F401  (likewise)
import trainyard.store.archive_counts  # noqa: F401  (likewise)
import trainyard.store.request_tables  # noqa: F401  (likewise)
from trainyard.store.tables import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    connection = create_engine(config.get_main_option("sqlalchemy.url")).connect()
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
