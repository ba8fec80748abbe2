"""Who schedules: exactly one server per database.

Several servers may share one database, each serving the API; exactly one of
them (the leader) schedules. Followers try for the lease every ``period``
seconds and the first to get it leads; a lone server leads before
:meth:`Lease.start` returns.

On a SQLite file, :class:`FileLease` is an exclusive ``flock`` on
``<database file>.lease``, held by the leader for as long as it runs. Servers
with different homes may name the same file (``--db``); SQLite needs a local
filesystem, so they share one kernel, which drops the lock the moment the
leader's process dies, however it dies. The leader writes its address beside
the file too (``ServerSettings.leader_file``), where launchers of every home
look for it again. An in-memory database has one server: :class:`SoleLease`
leads at once.

On PostgreSQL, :class:`AdvisoryLease` is a session-level advisory lock held on
a connection of its own. The lock lives and dies with that session: when the
leader's process dies its socket closes and PostgreSQL drops the lock at once;
when its machine vanishes, TCP keepalives end the session within about ten
seconds.

A leader checks its lease every ``period`` too (its session is alive; its lock
file is still the one at the path), and steps down (stops scheduling) the
moment that check fails, before anyone else can have the lease for long; the
store's compare-and-set covers the overlap of one check.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from typing import Callable, Protocol

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.pool import NullPool

from trainyard.config import sqlite_file
from trainyard.db_url import normalize_url

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
    """The only server there can be (an in-memory database): leads from the start."""

    leader = False

    def start(self, on_gain: Callback, on_loss: Callback) -> None:
        self.leader = True
        on_gain()

    def stop(self) -> None:
        self.leader = False


class _PolledLease:
    """A lease that followers try for, and its leader checks, every ``period`` on a thread of its own.
    A subclass says how to take it (:meth:`_acquire`), check it (:meth:`_alive`) and let it go (:meth:`_drop`)."""

    lost = "lost the leader lease"  # the warning when a check fails: why it was lost

    def __init__(self, period: float) -> None:
        self.period = period
        self._held = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._on_gain: Callback = lambda: None
        self._on_loss: Callback = lambda: None

    @property
    def leader(self) -> bool:
        return self._held

    def start(self, on_gain: Callback, on_loss: Callback) -> None:
        self._on_gain, self._on_loss = on_gain, on_loss
        self._stop.clear()
        self._tick()  # a lone server leads before start() returns
        self._thread = threading.Thread(target=self._run, name="trainyard-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        self._held = False
        self._drop()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._tick()

    def _tick(self) -> None:
        if not self._held:
            if self._acquire():
                self._held = True
                log.info("this server leads: it schedules")
                _call(self._on_gain)
        elif not self._alive():
            log.warning("%s: no longer scheduling", self.lost)
            self._held = False
            self._drop()
            _call(self._on_loss)

    def _acquire(self) -> bool:
        raise NotImplementedError

    def _alive(self) -> bool:
        raise NotImplementedError

    def _drop(self) -> None:
        raise NotImplementedError


class FileLease(_PolledLease):
    """Leadership by an exclusive ``flock`` on a lock file (beside a SQLite database)."""

    lost = "lost the leader lease (its lock file was removed or replaced)"

    def __init__(self, path: str | os.PathLike, *, period: float = LEASE_PERIOD) -> None:
        super().__init__(period)
        self.path = os.fspath(path)
        self._fd: int | None = None

    def _acquire(self) -> bool:
        try:
            # read-only is enough for flock; CLOEXEC: a launcher the leader starts must not keep its lock
            fd = os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            log.warning("lease: cannot open %s: %s", self.path, e)
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another server holds it
            os.close(fd)
            return False
        self._fd = fd
        if not self._alive():  # removed between our open and our lock: this lock guards nothing
            self._drop()
            return False
        return True

    def _alive(self) -> bool:
        # a lock on a file no longer at the path guards nothing: the next server would lock a new one
        try:
            st, mine = os.stat(self.path), os.fstat(self._fd)  # type: ignore[arg-type]
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)

    def _drop(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the flock


class AdvisoryLease(_PolledLease):
    """Leadership by ``pg_try_advisory_lock`` on a session of its own."""

    lost = "lost the leader lease (its database session ended)"

    def __init__(self, url: str, *, period: float = LEASE_PERIOD, key: int = LEADER_KEY) -> None:
        super().__init__(period)
        self._engine = create_engine(normalize_url(url), poolclass=NullPool, connect_args=KEEPALIVE)
        self.key = key
        self._conn: Connection | None = None

    def stop(self) -> None:
        super().stop()
        self._engine.dispose()

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
    """The lease for a database: advisory on PostgreSQL, a lock file beside a SQLite file, sole in memory."""
    if normalize_url(url).startswith("postgresql"):
        return AdvisoryLease(url)
    path = sqlite_file(url)
    return FileLease(f"{path}.lease") if path is not None else SoleLease()


def _call(fn: Callback) -> None:
    try:
        fn()
    except Exception:  # a failing start or stop must not end the lease's thread
        log.exception("leadership change failed")
