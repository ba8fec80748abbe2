"""What ``/metrics`` counts of deleted jobs' attempts, summed as they are archived.

The archive (:mod:`trainyard.store.usage_tables`) gains a row per deleted attempt for ever; a scrape that
grouped it would cost more each day (about 0.3 s per 100,000 rows on two cores). So each delete adds its
attempts to a few summed rows in its own transaction — per queue: attempts ended by each kind of reason,
attempts preempted, admission waits per bucket of :data:`WAIT_BOUNDS` — and a scrape reads those. Changing
the bounds needs a migration that sums the archive again.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any, Iterable, Mapping

from sqlalchemy import BigInteger, Float, String, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Mapped, mapped_column

from trainyard.status import AttemptStatus, Reason
from trainyard.store.tables import Base

WAIT_BOUNDS = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 3 * 3600.0, 12 * 3600.0)
ENDED = (AttemptStatus.SUCCEEDED.value, AttemptStatus.FAILED.value, AttemptStatus.CANCELLED.value)


class ArchiveCount(Base):
    __tablename__ = "archive_counts"
    queue: Mapped[str] = mapped_column(String(63), primary_key=True)
    metric: Mapped[str] = mapped_column(String(16), primary_key=True)  # ended, preempted, wait
    key: Mapped[str] = mapped_column(String(32), primary_key=True)  # the reason's kind, or the wait's bucket
    n: Mapped[int] = mapped_column(BigInteger)
    total: Mapped[float] = mapped_column(Float)  # the waits' sum


_T = ArchiveCount.__table__


def reason_kind(reason: str | None) -> str:
    """``Error(exit 3)`` counts as ``Error``: one series per reason, not per exit code."""
    kind = Reason.of(reason)
    return kind.value if kind else "Unknown"


def summed(attempts: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows to add for archived ``attempts`` (with queue, status, reason, preempted_by, wait)."""
    out: dict[tuple[str, str, str], list] = defaultdict(lambda: [0, 0.0])
    for a in attempts:
        if a["status"] in ENDED:
            out[(a["queue"], "ended", reason_kind(a["reason"]))][0] += 1
        if a["preempted_by"] is not None:
            out[(a["queue"], "preempted", "")][0] += 1
        if a["wait"] is not None:
            c = out[(a["queue"], "wait", str(bisect.bisect_left(WAIT_BOUNDS, a["wait"])))]
            c[0] += 1
            c[1] += float(a["wait"])
    return [dict(queue=q, metric=m, key=k, n=n, total=total) for (q, m, k), (n, total) in sorted(out.items())]


def add(conn, attempts: Iterable[Mapping[str, Any]]) -> None:  # noqa: ANN001
    """Add archived ``attempts`` to the sums, in the caller's transaction (two servers deleting at once each
    add theirs: an upsert, never a read then a write)."""
    rows = summed(attempts)
    if not rows:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(_T)
    conn.execute(stmt.on_conflict_do_update(index_elements=["queue", "metric", "key"],
                                            set_={"n": _T.c.n + stmt.excluded.n,
                                                  "total": _T.c.total + stmt.excluded.total}), rows)


def read(conn) -> list[tuple[str, str, str, int, float]]:  # noqa: ANN001
    """(queue, metric, key, n, total) of every sum."""
    return [tuple(r) for r in conn.execute(select(_T.c.queue, _T.c.metric, _T.c.key, _T.c.n, _T.c.total))]
