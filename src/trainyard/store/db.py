"""Engine creation and migrations: the one place that knows SQL dialects."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.pool import NullPool

from trainyard.db_url import normalize_url

MIGRATIONS = Path(__file__).parent / "migrations"
log = logging.getLogger("trainyard.store")


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    if url.startswith("sqlite"):
        # pool: SQLAlchemy's default (5 kept, 10 more) left readers in the API's 40 worker threads queued
        # for a connection, and closed and reopened (with its pragmas) every one past the 5th; 20 kept,
        # and room for every worker thread and the server's own loops
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False},
                               pool_size=20, max_overflow=40)
        _sqlite_pragmas(engine)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def writer_lock(engine: Engine) -> AbstractContextManager:
    """What a write transaction holds, in this process, from before its BEGIN to after its COMMIT.

    SQLite has one writer at a time, and a connection that finds the write lock
    taken polls for it with sleeps that grow to 100 ms (its busy handler): under
    load most of a writer's time went to sleeping while the lock was free. Queued
    on a lock of our own, writers of one process take turns without sleeping
    (another process still meets the busy timeout). PostgreSQL has row locks: none.
    Re-entrant, so a write opened inside another on one thread fails as it did
    before (the busy timeout) instead of hanging here.
    """
    return threading.RLock() if engine.url.get_backend_name() == "sqlite" else nullcontext()


class DataVersion:
    """SQLite's ``PRAGMA data_version``, asked on a connection of its own: it changes whenever any
    other connection commits to the file, this process's pooled ones and another process's alike
    (a second Store, `trainyard admin bootstrap`, a script, the sqlite3 shell). A connection never
    sees its own commits move it, hence one that only ever asks this. A few microseconds in WAL
    mode (a look at the shared WAL index), so it can be asked on every request."""

    def __init__(self, engine: Engine) -> None:
        raw = engine.raw_connection()  # with the engine's pragmas: WAL, autocommit (no read held open)
        self._db: Any = raw.driver_connection
        raw.detach()  # not the pool's: a reader that took it would commit on it, unseen
        self._lock = threading.Lock()  # one cursor at a time on it, whichever thread asks

    def __call__(self) -> int:
        with self._lock:
            return self._db.execute("PRAGMA data_version").fetchone()[0]

    def close(self) -> None:
        self._db.close()


def data_version(engine: Engine) -> DataVersion | None:
    """A number that changes after every commit to the database by anyone, or None where there is no
    cheap such number (PostgreSQL: each request reads)."""
    return DataVersion(engine) if engine.url.get_backend_name() == "sqlite" else None


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001
        # let SQLAlchemy's begin event issue BEGIN itself (pysqlite would defer it)
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        # reads through a memory map of the file (shared by every connection, paged in as touched): a
        # listing that sorts thousands of jobs reads their rows at memory speed, not through 2 MiB of cache
        cur.execute("PRAGMA mmap_size=268435456")
        cur.close()

    def do_begin(dbapi_conn):  # noqa: ANN001
        # A write transaction takes the write lock up front: a deferred one that reads first fails
        # with "database is locked" when it tries to upgrade. The dialect's own step, not a "begin"
        # event: one listener on the engine makes SQLAlchemy dispatch its (empty) events around
        # every statement, which was more than half of what a small statement cost it (48 → 20 µs,
        # bench/RESULTS.md, session 30)
        dbapi_conn.cursor().execute("BEGIN IMMEDIATE" if getattr(_writing, "on", False) else "BEGIN")

    engine.dialect.do_begin = do_begin  # type: ignore[method-assign]


_writing = threading.local()


@contextmanager
def writing() -> Iterator[None]:
    """The transaction that takes its connection in this block writes (SQLite: ``BEGIN IMMEDIATE``).
    Only around taking it: a read opened inside the write, on a connection of its own, is a read."""
    _writing.on = True
    try:
        yield
    finally:
        _writing.on = False


def migrate(url: str) -> None:
    """Bring the database to the newest schema (Alembic ``upgrade head``). Alembic's own INFO lines (its plugins,
    each step) stay out of the server's log: an upgrade of an existing database logs one line as it starts and
    one as it ends; a new database, and one already at the newest schema, none."""
    quiet = logging.getLogger("alembic")
    level = quiet.level
    quiet.setLevel(max(quiet.getEffectiveLevel(), logging.WARNING))
    try:
        _upgrade(url)
    finally:
        quiet.setLevel(level)


def _upgrade(url: str) -> None:
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    engine = create_engine(normalize_url(url), poolclass=NullPool)
    if engine.url.get_backend_name() == "sqlite":
        _sqlite_pragmas(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        current = MigrationContext.configure(conn).get_current_revision()
        head = ScriptDirectory.from_config(cfg).get_current_head()
        if current is not None and current != head:
            log.info("upgrading the database's schema from revision %s to %s", current, head)
        started = time.monotonic()
        command.upgrade(cfg, "head")
        if current is not None and current != head:
            log.info("the database's schema is at revision %s (upgraded in %.1fs)", head, time.monotonic() - started)
    engine.dispose()
