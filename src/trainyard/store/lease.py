"""Who schedules: exactly one server per database.

On SQLite the database is a file in the home, and the home's exclusive lock
(:mod:`trainyard.home`) already makes its server the only one:
:class:`SoleLease` leads at once. On PostgreSQL several API servers may share
one database; :class:`AdvisoryLease` makes exactly one of them the leader with
a session-level advisory lock held on a connection of its own. The lock lives
and dies with that session: when the leader's process dies its socket closes
and PostgreSQL drops the lock at once; when its machine vanishes, TCP
keepalives end the session within about ten seconds. Followers try every
``period`` seconds and the first to get the lock leads.

A leader checks its session every ``period`` too, and steps down (stops
scheduling) the moment that check fails, before anyone else can have the lock
for long; the store's compare-and-set covers the overlap of one check.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Protocol

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.pool import NullPool

from trainyard.store.db import normalize_url

log = logging.getLogger("trainyard.lease")
LEADER_KEY = 0x7472_6169_6E79_6172  # "trainyar": one lock id for every trainyard database
LEASE_PERIOD = 1.0  # seconds between a follower's tries, and between a leader's checks
# libpq settings for the lease's session: a partitioned leader's connection dies within ~10 s
KEEPALIVE = {"keepalives": 1, "keepalives_idle": 4, "keepalives_interval": 2, "keepalives_count": 3,
             "tcp_user_timeout": 10_000, "connect_timeout": 5}

Callback = Callable[[], None]


class Lease(Protocol):
    def start(self, on_gain: Callback, on_loss: Callback) -> None:
        """Call ``on_gain`` when this server becomes the leader, ``on_loss`` when it stops being one."""

    def stop(self) -> None:
        """Give the lease up (after the caller stopped what leading started)."""

    @property
    def leader(self) -> bool: ...


class SoleLease:
    """The only server there can be: leads from the start."""

    leader = False

    def start(self, on_gain: Callback, on_loss: Callback) -> None:
        self.leader = True
        on_gain()

    def stop(self) -> None:
        self.leader = False


class AdvisoryLease:
    """Leadership by ``pg_try_advisory_lock`` on a session of its own."""

    def __init__(self, url: str, *, period: float = LEASE_PERIOD, key: int = LEADER_KEY) -> None:
        self._engine = create_engine(normalize_url(url), poolclass=NullPool, connect_args=KEEPALIVE)
        self.period = period
        self.key = key
        self._conn: Connection | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._on_gain: Callback = lambda: None
        self._on_loss: Callback = lambda: None

    @property
    def leader(self) -> bool:
        return self._conn is not None

    def start(self, on_gain: Callback, on_loss: Callback) -> None:
        self._on_gain, self._on_loss = on_gain, on_loss
        self._stop.clear()
        self._tick()  # a lone server leads before start() returns, as on SQLite
        self._thread = threading.Thread(target=self._run, name="trainyard-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        self._drop()
        self._engine.dispose()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._tick()

    def _tick(self) -> None:
        if self._conn is None:
            if self._acquire():
                log.info("this server leads: it schedules")
                _call(self._on_gain)
        elif not self._alive():
            log.warning("lost the leader lease (its database session ended): no longer scheduling")
            self._drop()
            _call(self._on_loss)

    def _acquire(self) -> bool:
        try:
            conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        except Exception as e:  # the database is down: try again next period
            log.debug("lease: cannot connect: %s", e)
            return False
        try:
            got = conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": self.key}).scalar()
        except Exception:
            conn.close()
            return False
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    def _alive(self) -> bool:
        try:
            self._conn.execute(text("SELECT 1"))  # type: ignore[union-attr]
            return True
        except Exception:
            return False

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()  # ends the session, and with it the lock
            except Exception:
                pass


def make_lease(url: str) -> Lease:
    """The lease for a database: advisory on PostgreSQL, sole on a SQLite file."""
    return AdvisoryLease(url) if normalize_url(url).startswith("postgresql") else SoleLease()


def _call(fn: Callback) -> None:
    try:
        fn()
    except Exception:  # a failing start or stop must not end the lease's thread
        log.exception("leadership change failed")
