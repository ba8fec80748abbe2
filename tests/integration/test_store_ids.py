"""Ids that readers hold are never given twice, on SQLite and PostgreSQL.

A log follower reads chunks after the id of the last one it had, the webhooks read the events after a cursor,
and a webhook sender holds a delivery's id while it sends. SQLite without AUTOINCREMENT gives the next row
max(id) + 1: once the newest row is deleted, its id goes to the next row, which such a reader would skip or
take for the one it held (migration 0028).
"""

from __future__ import annotations

import pytest
from sqlalchemy import delete, insert, text

from trainyard.spec.webhooks import SubscriptionCreate
from trainyard.store import Store
from trainyard.store.tables import Base
from trainyard.store.webhooks import WebhookStore

pytestmark = pytest.mark.postgres

ROWS = {
    "log_chunks": dict(job_id="j-1", attempt_id="j-1-1", attempt=1, replica=0, offset=0, data="hi\n"),
    "events": dict(kind="job", object_id="j-1", ts=1.0, new_status="pending", actor="user"),
    "deliveries": dict(subscription_id="ws-1", webhook="ops", event_id=1, kind="job", object_id="j-1",
                       event="failed", payload={}, status="sent", attempts=1, created_at=1.0),
}


def row(name: str, n: int) -> dict:
    """The ``n``-th of like rows of table ``name`` (a delivery is one per subscription and event)."""
    return {**ROWS[name], "event_id": n} if name == "deliveries" else ROWS[name]


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    yield s
    s.close()


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_id_of_the_newest_row_once_deleted_is_not_given_again(store, name):
    table = Base.metadata.tables[name]
    with store.engine.begin() as conn:
        [older, newest] = [conn.execute(insert(table).values(row(name, n))).inserted_primary_key[0] for n in (1, 2)]
        conn.execute(delete(table).where(table.c.id == newest))
        after = conn.execute(insert(table).values(row(name, 3))).inserted_primary_key[0]
    assert older < newest < after


def test_the_migrations_make_exactly_the_declared_tables_autoincrement_on_sqlite(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'ids.db'}")
    try:
        with store.engine.connect() as conn:
            made = {n for n, sql in conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
                    if "AUTOINCREMENT" in sql}
    finally:
        store.close()
    assert made == {t.name for t in Base.metadata.sorted_tables if t.dialect_kwargs.get("sqlite_autoincrement")}
    assert made == {"log_chunks", "events", "deliveries"}


def test_a_delivery_deleted_while_it_is_sent_leaves_the_next_one_owed_unsent(store):
    hooks = WebhookStore(store)
    gone, kept = (hooks.subscribe("ann", SubscriptionCreate(webhook="ops"), None) for _ in "ab")
    hooks.start_cursor()
    cursor = hooks.ended_since()[0]

    def owe(sub_id: str) -> None:
        assert hooks.owe(cursor, cursor, [{**ROWS["deliveries"], "subscription_id": sub_id}])

    owe(gone)
    [taken] = hooks.due(1e12, 10)
    # while it is sent, its subscription goes (and its pending deliveries), and another is owed
    hooks.unsubscribe(gone)
    owe(kept)
    hooks.sent(taken["id"], 1)  # the sender's answer, for the delivery it took
    [other] = hooks.deliveries(kept)
    assert (other.status, other.attempts) == ("pending", 0)
