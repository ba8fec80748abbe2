"""The deleted jobs' sums ``/metrics`` reads (:mod:`trainyard.store.archive_counts`), on SQLite and PostgreSQL:
each delete adds to them in its own transaction, and what they hold is what grouping the archive gives."""

from __future__ import annotations

import pytest

from trainyard.store import Store, archive_counts
from trainyard.store.archive_counts import WAIT_BOUNDS, summed

pytestmark = pytest.mark.postgres


def attempt(queue="q", status="succeeded", reason="Succeeded", by=None, wait=None) -> dict:
    return dict(queue=queue, status=status, reason=reason, preempted_by=by, wait=wait)


def test_a_wait_on_a_bound_is_in_that_bound_and_exit_codes_are_one_reason():
    rows = summed([attempt(wait=1.0), attempt(wait=1.0001), attempt(wait=1e9), attempt(status="running", wait=0.0),
                   attempt(status="failed", reason="Error(exit 3)"), attempt(status="failed", reason="Error(exit -9)"),
                   attempt(status="cancelled", reason="made up", by="j-1")])
    got = {(r["metric"], r["key"]): (r["n"], r["total"]) for r in rows}
    assert got[("wait", "0")] == (2, 1.0) and got[("wait", "1")] == (1, 1.0001)
    assert got[("wait", str(len(WAIT_BOUNDS)))] == (1, 1e9)  # past the last bound: +Inf only
    assert got[("ended", "Succeeded")] == (3, 0.0) and got[("ended", "Error")] == (2, 0.0)
    assert got[("ended", "Unknown")] == (1, 0.0) and got[("preempted", "")] == (1, 0.0)
    assert ("ended", "Running") not in got  # a running attempt is not an ended one


def test_deletes_add_to_the_same_sums_one_after_another(db_url):
    store = Store(db_url)
    try:
        for batch in ([attempt(wait=2.0), attempt(queue="other")], [attempt(wait=4.0)], [attempt(by="j-9")]):
            with store.write() as s:
                archive_counts.add(s.connection(), batch)
        with store.read() as s:
            got = {(q, m, k): (n, total) for q, m, k, n, total in archive_counts.read(s.connection())}
        assert got == {("q", "ended", "Succeeded"): (3, 0.0), ("other", "ended", "Succeeded"): (1, 0.0),
                       ("q", "wait", "1"): (2, 6.0), ("q", "preempted", ""): (1, 0.0)}
        waits = store.admission_waits()
        assert (waits["q"].count, waits["q"].total, waits["q"].buckets[0], waits["q"].buckets[1]) == (2, 6.0, 0, 2)
    finally:
        store.close()
