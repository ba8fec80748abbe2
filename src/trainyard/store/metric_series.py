"""How many points of each metric the server keeps: evenly spaced ones, and the newest.

A job that logs every step of a long run (or in a tight loop) would otherwise
fill the database, and every chart that reads the job's points. Each series (a
metric of one replica of one attempt) numbers its points as they come, 0, 1, …,
and stores those on its stride (number % stride == 0) and, always, its newest.
When more than ``keep`` numbers lie on the stride, the stride doubles and the
points off it are deleted: a long series keeps between keep/2 and keep evenly
spaced points from its first to its newest, as a chart would sample them
(TensorBoard keeps 1,000 per tag, at random; here the start of the curve stays
as even as its end). The whole series stays in ``metrics.jsonl`` in the
attempt's folder on its node.

A replica logs at most :data:`NAMES` metric names; points of further names are
not stored, and the replica's log says so once.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy import bindparam, delete, insert, select, update

from trainyard.store import tables as t

NAMES = 1000  # metric names of one replica; a name per step (an id in the name) would be a series per point
DROPPED = ""  # the series row that counts points of names past NAMES (no metric has an empty name)

_S, _M = t.MetricSeries.__table__, t.Metric.__table__
_SERIES = select(_S.c.name, _S.c.received, _S.c.stride).where(
    _S.c.attempt_id == bindparam("k_attempt_id"), _S.c.replica == bindparam("k_replica"))
_NEW = insert(_S)
_MOVE = update(_S).where(_S.c.attempt_id == bindparam("k_attempt_id"), _S.c.replica == bindparam("k_replica"),
                         _S.c.name == bindparam("k_name")).values(received=bindparam("v_received"),
                                                                  stride=bindparam("v_stride"))


class Point(NamedTuple):
    """One value of a metric line (``_record_usage`` reads the ``system/…`` ones as they came)."""

    name: str
    step: int | None
    value: float
    ts: float


def dropped_note() -> str:
    return (f"\n[trainyard: this replica logged more than {NAMES:,} metric names; points of the names past them "
            "are not stored (all are in metrics.jsonl in the attempt's folder on its node)]\n")


def store_points(s, job_id: str, attempt_id: str, attempt: int, replica: int,  # noqa: ANN001
                 points: list[Point], keep: int) -> bool:
    """Store what ``keep`` (0: every point) leaves of ``points``, the replica's next points in the order they
    came, in transaction ``s``. True when points of names past :data:`NAMES` were dropped for the first time."""
    conn = s.connection()
    key = {"k_attempt_id": attempt_id, "k_replica": replica}
    have = {name: (received, stride) for name, received, stride in conn.execute(_SERIES, key)}
    named = len(have) - (DROPPED in have)
    by_name: dict[str, list[Point]] = {}
    dropped = 0
    for p in points:
        mine = by_name.get(p.name)
        if mine is None:
            if p.name not in have and named >= NAMES:
                dropped += 1
                continue
            named += p.name not in have
            mine = by_name[p.name] = []
        mine.append(p)
    rows: list[dict[str, Any]] = []
    new: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    for name, mine in by_name.items():
        before, stride0 = have.get(name, (0, 1))
        received, stride = before + len(mine), stride0
        while keep and (received + stride - 1) // stride > keep:  # numbers on the stride, 0 … received - 1
            stride *= 2
        last = received - 1
        rows.extend(dict(job_id=job_id, attempt=attempt, replica=replica, step=p.step, name=name, value=p.value,
                         ts=p.ts, seq=seq)
                    for seq, p in enumerate(mine, before) if seq % stride == 0 or seq == last)
        c = _M.c
        series = (c.job_id == job_id, c.attempt == attempt, c.replica == replica, c.name == name)
        if before and stride != stride0:  # every stored point the doubled stride leaves (a range of the index)
            conn.execute(delete(_M).where(*series, c.seq < before, c.seq % stride != 0))
        elif before and (before - 1) % stride:  # the newest of earlier reports, off the stride (one entry)
            conn.execute(delete(_M).where(*series, c.seq == before - 1))
        if name in have:
            moved.append({**key, "k_name": name, "v_received": received, "v_stride": stride})
        else:
            new.append(dict(attempt_id=attempt_id, replica=replica, name=name, received=received, stride=stride))
    first_drop = False
    if dropped:
        if DROPPED in have:
            moved.append({**key, "k_name": DROPPED, "v_received": have[DROPPED][0] + dropped, "v_stride": 1})
        else:
            new.append(dict(attempt_id=attempt_id, replica=replica, name=DROPPED, received=dropped, stride=1))
            first_drop = True
    if new:
        conn.execute(_NEW, new)
    if moved:
        conn.execute(_MOVE, moved)
    if rows:
        conn.execute(insert(_M), rows)
    return first_drop
