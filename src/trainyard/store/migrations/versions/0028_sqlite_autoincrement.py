"""ids a reader holds are never given twice on SQLite: log chunks (a follower's cursor), events (the webhooks'
cursor) and webhook deliveries (a sender's claim) get AUTOINCREMENT

Without it SQLite gives the next row max(id) + 1, so once the newest row is deleted (a log cut, a deleted job
or pipeline run, an unsubscribe) its id goes to the next row written: a reader past that id never reads it, and
a sender marks another delivery as sent. A PostgreSQL sequence never gives a number twice: nothing to do there.

Revision ID: 0028_sqlite_autoincrement
Revises: 0027_service_replica_token
"""

from alembic import op

revision = "0028_sqlite_autoincrement"
down_revision = "0027_service_replica_token"
branch_labels = None
depends_on = None

_TABLES = ("log_chunks", "events", "deliveries")

# the webhooks' cursor may already lie past the newest event (its row deleted before this upgrade): the ids up
# to it were given, and the next event must come after it, else the webhooks would skip it
_PAST_CURSOR = """
UPDATE sqlite_sequence SET seq = (SELECT max(event_id) FROM event_cursors)
WHERE name = 'events' AND seq < (SELECT max(event_id) FROM event_cursors)
"""
# (no HAVING without GROUP BY: SQLite before 3.39 refuses it)
_NO_EVENTS = """
INSERT INTO sqlite_sequence (name, seq) SELECT 'events', (SELECT max(event_id) FROM event_cursors)
WHERE (SELECT max(event_id) FROM event_cursors) > 0 AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events')
"""


def _rebuild(autoincrement: bool) -> None:
    # a copy of each table, every row and index kept; the copy's rows set its sqlite_sequence to their max id.
    # Legacy mode for the rename that ends each copy: the events triggers on jobs and pipeline_runs (0007)
    # name events, and the rename would read them again, and fail, while the table is gone
    op.execute("PRAGMA legacy_alter_table=ON")
    try:
        for name in _TABLES:
            with op.batch_alter_table(name, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}):
                pass
    finally:
        op.execute("PRAGMA legacy_alter_table=OFF")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _rebuild(True)
    op.execute(_PAST_CURSOR)
    op.execute(_NO_EVENTS)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _rebuild(False)
