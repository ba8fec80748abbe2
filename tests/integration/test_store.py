"""The store on SQLite and on a real PostgreSQL server."""

import json
import threading

import pytest
from sqlalchemy import func, inspect, select

from trainyard.auth.tokens import token_hash
from trainyard.spec import parse_job
from trainyard.status import AttemptStatus, JobStatus, Reason
from trainyard.spec.service import ServiceSpec, ServiceStatus
from trainyard.store import Admission, Ending, Store, metric_series
from trainyard.store.services import ServiceStore
from trainyard.store.tables import Base, Metric

pytestmark = pytest.mark.postgres
H = token_hash("launcher-token")  # an attempt's credential, as the store keeps it


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    yield s
    s.close()


def running_attempt(store: Store):
    job = store.create_job(parse_job("command: echo hi"))
    attempt = store.admit(job.id, [("node-a", ["0"])], token_hash=H)
    store.report(attempt.id, 0, token_hash=H, running=True)
    return job, attempt


def test_admissions_of_a_cycle_in_one_call_each_check_their_own_job(store):
    taken = store.create_job(parse_job("command: a"))
    assert store.admit(taken.id, [("n", [])], token_hash=H) is not None  # another loop was first
    free = store.create_job(parse_job("command: b\nreplicas: 2\ndistributed: torch"))
    got = store.admit_many([Admission(taken.id, [("n", [])], token_hash=H),
                            Admission(free.id, [("a", ["0"]), ("b", ["1"])], True, H)])
    assert got[0] is None and [a.number for a in store.get_job(taken.id).attempts] == [1]
    assert got[1].id == f"{free.id}-1" and got[1].borrowed and len(got[1].replicas) == 2
    assert store.get_job(free.id).status == JobStatus.STARTING
    store.set_handles({got[1].id: {"replicas": [{"pid": 1}, {"pid": 2}]}})
    assert store.get_attempt(got[1].id).handle == {"replicas": [{"pid": 1}, {"pid": 2}]}
    assert store.get_attempt(f"{taken.id}-1").handle == {}  # only the named attempts
    twice = store.create_job(parse_job("command: c"))  # named twice in one cycle: moved once, by the first
    got = store.admit_many([Admission(twice.id, [("n", [])], token_hash=H)] * 2)
    assert got[0].id == f"{twice.id}-1" and got[1] is None and len(store.get_job(twice.id).attempts) == 1


def test_migrations_create_exactly_the_declared_tables(store):
    insp = inspect(store.engine)
    for table in Base.metadata.sorted_tables:
        assert {c["name"] for c in insp.get_columns(table.name)} == {c.name for c in table.columns}, table.name


def test_a_gang_attempt_has_one_row_per_replica(store):
    job = store.create_job(parse_job("command: x\nreplicas: 2\ndistributed: torch"))
    attempt = store.admit(job.id, [("a", ["0"]), ("b", ["1"])], token_hash=H)
    assert [(r.index, r.node, r.gpus) for r in attempt.replicas] == [(0, "a", ["0"]), (1, "b", ["1"])]
    assert store.report(attempt.id, 1, token_hash=H, running=True) == (job.id, None, None)
    assert store.get_job(job.id).status == JobStatus.RUNNING
    after, ended = store.finish_replica(attempt.id, 1, AttemptStatus.FAILED, exit_code=1, reason="Error(exit 1)",
                                        message=None)
    assert not ended and [r.status for r in after.replicas] == [AttemptStatus.STARTING, AttemptStatus.FAILED]
    assert store.finish_replica(attempt.id, 1, AttemptStatus.FAILED, exit_code=1, reason="x", message=None) is None
    assert store.request_stop(attempt.id, "replica 1 failed") and not store.request_stop(attempt.id, "again")
    assert store.get_attempt(attempt.id).stop_reason == "replica 1 failed"


def test_a_job_runs_through_its_states(store):
    job, attempt = running_attempt(store)
    assert store.get_job(job.id).status == JobStatus.RUNNING
    assert store.finish_attempt(attempt.id, Ending(AttemptStatus.SUCCEEDED, 0, Reason.SUCCEEDED, None,
                                                   JobStatus.SUCCEEDED))
    info = store.get_job(job.id)
    assert info.status == JobStatus.SUCCEEDED and info.attempts[0].exit_code == 0


def test_terminal_states_are_final_and_a_result_applies_once(store):
    job, attempt = running_attempt(store)
    assert store.finish_attempt(attempt.id, Ending(AttemptStatus.FAILED, 1, Reason.error(1), None, JobStatus.FAILED))
    assert not store.finish_attempt(attempt.id, Ending(AttemptStatus.SUCCEEDED, 0, Reason.SUCCEEDED, None,
                                                       JobStatus.SUCCEEDED))
    assert store.get_job(job.id).status == JobStatus.FAILED
    assert not store.move_job(job.id, JobStatus.PENDING)
    assert store.request_cancel(job.id) == JobStatus.FAILED


def test_two_racing_admissions_move_a_job_once(store):
    job = store.create_job(parse_job("command: echo hi"))
    results = []
    barrier = threading.Barrier(4)

    def admit():
        barrier.wait()
        results.append(store.admit(job.id, [("n", [])]))

    threads = [threading.Thread(target=admit) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r is not None for r in results) == 1
    assert len(store.get_job(job.id).attempts) == 1


def test_logs_and_metrics_are_idempotent_by_offset(store):
    job, attempt = running_attempt(store)
    store.append_log(attempt.id, 0, 0, "héllo\n")
    store.append_log(attempt.id, 0, 0, "héllo\nworld\n")  # a resend after a lost answer
    store.append_log(attempt.id, 0, 7, "world\n")           # an older resend
    chunks, cursor = store.read_logs(job.id)
    assert "".join(c.data for c in chunks) == "héllo\nworld\n"
    line = '{"step": 1, "ts": 1.0, "values": {"loss": 0.5, "acc": 0.9}}'
    store.add_metrics(attempt.id, 0, 0, [line])
    store.add_metrics(attempt.id, 0, 0, [line, '{"step": 2, "ts": 2.0, "values": {"loss": 0.25}}'])
    assert [(m.step, m.name, m.value) for m in store.metrics(job.id)] == [
        (1, "loss", 0.5), (1, "acc", 0.9), (2, "loss", 0.25)]


def test_listing_is_paginated_and_filtered(store):
    ids = [store.create_job(parse_job(f"name: n{i}\ncommand: x")).id for i in range(5)]
    store.request_cancel(ids[0])
    page = store.list_jobs(limit=2)
    assert [j.id for j in page.items] == ids[:2:-1][:2] and page.next_cursor
    rest = store.list_jobs(limit=10, cursor=page.next_cursor)
    assert [j.id for j in rest.items] == ids[2::-1]
    assert [j.id for j in store.list_jobs(status=["cancelled"]).items] == [ids[0]]
    assert [j.id for j in store.list_jobs(name="n3").items] == [ids[3]]


def test_the_waiting_line_carries_how_each_jobs_last_attempt_ended_and_active_attempts_their_replicas(store):
    again = store.create_job(parse_job("command: x\nretry: {max: 3}"))
    fresh = store.create_job(parse_job("command: y"))
    for number, (reason, by) in enumerate([(Reason.LOST, None), (Reason.PREEMPTED, fresh.id)], start=1):
        attempt = store.admit(again.id, [("a", ["0"]), ("b", [])])
        if by:
            assert store.preempt(attempt.id, by) and not store.preempt(attempt.id, "j-other")
        store.finish_attempt(attempt.id, Ending(AttemptStatus.FAILED, None, reason, None, JobStatus.PENDING, reason))
    running = store.admit(store.create_job(parse_job("command: z\nreplicas: 2\ndistributed: torch")).id,
                          [("a", ["1"]), ("b", ["2"])])
    line = store.waiting()
    assert [(w.id, w.last_reason, w.last_preempted_by) for w in line] == [
        (again.id, Reason.PREEMPTED, fresh.id), (fresh.id, None, None)]
    assert store.specs([fresh.id])[fresh.id][0].command == "y"
    [active] = store.active_attempts()
    assert active == store.get_attempt(running.id)
    assert [(r.node, r.gpus, r.status) for r in active.replicas] == [("a", ["1"], "starting"), ("b", ["2"], "starting")]
    # the scheduler's read of both at once is the same line and the same attempts
    assert store.line() == (line, [active])


def test_an_empty_line_is_read_without_the_active_attempts(store):
    store.admit(store.create_job(parse_job("command: z")).id, [("a", [])])
    assert store.line() == ([], [])


def test_a_first_report_that_is_also_the_last_starts_and_ends_in_one_go(store):
    from trainyard.services.attempts import _conclude

    done = {"status": AttemptStatus.SUCCEEDED, "exit_code": 0, "reason": Reason.SUCCEEDED, "message": None,
            "conclude": _conclude}
    job = store.create_job(parse_job("command: x"))
    attempt = store.admit(job.id, [("a", [])], token_hash=H)
    _, _, (ended, over) = store.report(attempt.id, 0, token_hash=H, running=True, log=(0, "hi\n"), end=done)
    info = store.get_job(job.id)
    assert over and info.status == JobStatus.SUCCEEDED and info.attempts[0].status == AttemptStatus.SUCCEEDED
    a = info.attempts[0]
    assert a.started_at is not None and a.started_at <= a.ended_at and a.replicas[0].started_at == a.started_at
    # in a gang, the others still to come: the attempt and its job are running meanwhile
    gang = store.create_job(parse_job("command: x\nreplicas: 2\ndistributed: torch"))
    attempt = store.admit(gang.id, [("a", []), ("b", [])], token_hash=H)
    store.report(attempt.id, 0, token_hash=H, running=True, end=done)
    info = store.get_job(gang.id)
    assert info.status == JobStatus.RUNNING and info.attempts[0].status == AttemptStatus.RUNNING
    assert info.attempts[0].started_at is not None
    store.report(attempt.id, 1, token_hash=H, running=True, end=done)
    assert store.get_job(gang.id).status == JobStatus.SUCCEEDED


def test_reads_kept_in_memory_follow_the_job_until_it_has_ended(store, db_url):
    # given a job read while it runs (the store keeps ended jobs and specs between reads)
    job, attempt = running_attempt(store)
    assert store.get_job(job.id).status == JobStatus.RUNNING
    assert [j.status for j in store.list_jobs().items] == [JobStatus.RUNNING]
    # when it ends
    store.finish_attempt(attempt.id, Ending(AttemptStatus.FAILED, 3, "Error(exit 3)", "boom", JobStatus.FAILED))
    # then a read, and a listing, show the end, not what was read before
    for info in (store.get_job(job.id), store.list_jobs().items[0]):
        assert info.status == JobStatus.FAILED and info.attempts[0].exit_code == 3
        assert info.spec.command == "echo hi"
    # and a second store on the same database (another server) reads the same job and spec
    other = Store(db_url, run_migrations=False)
    try:
        assert other.get_job(job.id).model_dump() == store.get_job(job.id).model_dump()
    finally:
        other.close()


def test_a_job_ended_by_its_last_report_is_kept_as_the_database_has_it(store, db_url):
    from trainyard.services.attempts import _conclude

    end = {"status": AttemptStatus.FAILED, "exit_code": 2, "reason": "Error(exit 2)", "message": "bad",
           "conclude": _conclude}
    # given two jobs: one whose first report is its last, one that reported running first
    quick = store.create_job(parse_job("command: x"), owner="ann", team="t")
    slow, running = running_attempt(store)
    attempt = store.admit(quick.id, [("a", ["1"])], token_hash=H)
    # when their last reports end them
    store.report(attempt.id, 0, token_hash=H, running=True, end=end)
    store.report(running.id, 0, token_hash=H, running=True, end={**end, "exit_code": 0, "reason": Reason.SUCCEEDED,
                                                                  "status": AttemptStatus.SUCCEEDED})
    # then the record kept from the report's own rows (read without a query) is what the database holds
    other = Store(db_url, run_migrations=False)
    try:
        for job_id, status in ((quick.id, JobStatus.FAILED), (slow.id, JobStatus.SUCCEEDED)):
            kept = store.ended_job(job_id)
            assert kept is not None and kept.status == status
            assert kept.model_dump() == other.get_job(job_id).model_dump()
    finally:
        other.close()


def test_a_submit_writes_its_audit_entry_with_the_job_naming_the_new_id(store):
    # when a job is created with its audit entry (one transaction, one writer turn)
    job = store.create_job(parse_job("command: x"), owner="ann",
                           audit={"user": "ann", "source": "10.0.0.1", "action": "job.submit", "detail": {"q": 1}})
    store.create_job(parse_job("command: y"))  # and one without
    # then the entry names the job the store made, and only that one was audited
    [entry] = store.audit()
    assert (entry.user, entry.source, entry.action, entry.target, entry.detail) == (
        "ann", "10.0.0.1", "job.submit", job.id, {"q": 1})


def test_a_cycle_sets_reasons_and_positions_of_pending_jobs_only_and_moves_them_again(store):
    a, b, gone = (store.create_job(parse_job(f"command: {c}")) for c in ("a", "b", "c"))
    assert store.admit(gone.id, [("n", [])], token_hash=H) is not None  # left the line after the plan
    store.set_reasons({a.id: "no room", b.id: "no room", gone.id: "no room"}, {a.id: 0, b.id: 1, gone.id: 2})
    assert [(j.reason, j.position) for j in map(store.get_job, (a.id, b.id))] == [("no room", 0), ("no room", 1)]
    assert (store.get_job(gone.id).reason, store.get_job(gone.id).position) == (None, None)
    store.set_reasons({b.id: "over quota"}, {b.id: 0})  # a moved up, b's text changed; a itself not named
    assert (store.get_job(b.id).reason, store.get_job(b.id).position) == ("over quota", 0)
    assert (store.get_job(a.id).reason, store.get_job(a.id).position) == ("no room", 0)
    store.set_reasons({a.id: "no room"})  # no positions: cleared
    assert (store.get_job(a.id).reason, store.get_job(a.id).position) == ("no room", None)


def test_the_service_loops_one_read_finds_what_its_separate_reads_found(store):
    # given a live service whose replicas' jobs are waiting, running, and on their second attempt (the first
    # ended, the second not started yet), and a stopped service with a replica row left
    services = ServiceStore(store)
    spec = ServiceSpec.model_validate({"name": "web", "command": ["python", "app.py"], "service": {"replicas": 3}})
    live = services.create(spec, None, 3, "ana", None)
    stopped = services.create(spec.model_copy(update={"name": "old"}), None, 1, "ana", None)
    assert services.move(stopped, ServiceStatus.STOPPING) and services.move(stopped, ServiceStatus.STOPPED)
    waiting, running, again, gone = (store.create_job(parse_job("command: x\nretry: {max: 3}")) for _ in range(4))
    store.report(store.admit(running.id, [("n", [])], token_hash=H).id, 0, token_hash=H, running=True)
    first = store.admit(again.id, [("n", [])], token_hash=H)
    store.report(first.id, 0, token_hash=H, running=True)
    store.finish_attempt(first.id, Ending(AttemptStatus.FAILED, 1, Reason.error(1), None, JobStatus.PENDING,
                                          "retrying"))
    store.admit(again.id, [("n", [])], token_hash=H)
    for job in (waiting, running, again):
        services.add_replica(live, job.id, 1)
    services.add_replica(stopped, gone.id, 1)

    # when the loop reads them at once
    rows, replicas, jobs = services.tick_view()

    # then it has the live service alone, its replicas oldest first, and of each replica's job what a whole read
    # gives: status, reason, and when its last attempt started (or was admitted; none before any attempt)
    assert [r["id"] for r in rows] == [live] and rows[0]["spec"] == spec
    assert replicas == services.replicas([live])
    assert set(jobs) == {waiting.id, running.id, again.id}
    for job_id, seen in jobs.items():
        whole = store.get_job(job_id)
        last = whole.attempts[-1] if whole.attempts else None
        assert seen == (job_id, whole.status, whole.reason, (last.started_at or last.created_at) if last else None)
    assert jobs[waiting.id].started is None and jobs[running.id].status == JobStatus.RUNNING
    second = store.get_job(again.id).attempts[1]
    assert second.started_at is None and jobs[again.id].started == second.created_at
    # and with no live service, nothing else is read
    assert services.move(live, ServiceStatus.STOPPING) and services.move(live, ServiceStatus.STOPPED)
    assert services.tick_view() == ([], {}, {})


def _log_of(store, job_id: str) -> str:
    return "".join(c.data for c in store.read_logs(job_id, limit=100_000)[0])


def test_a_log_past_the_bound_keeps_its_first_and_last_half_and_says_so(store):
    from trainyard.store.log_bound import MARK
    from trainyard.store.telemetry import log_note

    store.log_keep = 4000
    job, attempt = running_attempt(store)
    text = "".join(f"line {i:05d}\n" for i in range(2000))  # 22,000 bytes, sent in reports of 11 lines
    for at in range(0, len(text), 121):
        store.append_log(attempt.id, 0, at, text[at:at + 121])
    chunks, _ = store.read_logs(job.id, limit=100_000)
    kept = "".join(c.data for c in chunks)
    head, note, tail = kept.partition(log_note(4000))
    # the first half, cut where it ends; the last half, less at most the bytes since the last cut (a step, 250 here),
    # its first line marked as cut inside (log_bound.lead)
    assert note and head == text[:2000]
    assert tail.startswith(MARK)
    kept_end = tail[len(MARK):]
    assert text.endswith(kept_end) and 2000 - 250 <= len(kept_end) < 2000
    assert [c.offset for c in chunks if c.data == note] == [-1]
    assert len(chunks) < 2 * 2000 // 121 + 10  # the middle's chunks are gone from the database, not only hidden
    # a resend of what was already received changes nothing
    store.append_log(attempt.id, 0, 0, text[:500])
    assert _log_of(store, job.id) == kept


def test_a_report_larger_than_the_kept_end_keeps_only_its_last_part(store):
    store.log_keep = 1000
    job, attempt = running_attempt(store)
    text = "".join(chr(ord("a") + i % 26) for i in range(5000))
    store.append_log(attempt.id, 0, 0, text)
    head, _, tail = _log_of(store, job.id).partition("[trainyard:")
    assert text.startswith(head.rstrip("\n")) and len(head.rstrip("\n")) == 500
    assert tail.endswith(text[-474:]) and 500 - 62 <= len(tail.partition("\n")[2]) < 500  # a step: 62 bytes
    assert text[500:4500] not in _log_of(store, job.id)


def test_with_log_keep_zero_every_byte_is_kept(store):
    store.log_keep = 0
    job, attempt = running_attempt(store)
    text = "x" * 300_000
    for at in range(0, len(text), 50_000):
        store.append_log(attempt.id, 0, at, text[at:at + 50_000])
    assert _log_of(store, job.id) == text


def _metric_lines(store, attempt, lines: list[str], per_report: int, start: int = 0) -> int:
    """Send ``lines`` as a launcher does, ``per_report`` at a time from byte ``start``; the next offset."""
    at = start
    for i in range(0, len(lines), per_report):
        batch = lines[i:i + per_report]
        store.add_metrics(attempt.id, 0, at, batch)
        at += sum(len(x.encode()) + 1 for x in batch)
    return at


def _line(step: int, **values: float) -> str:
    return json.dumps({"step": step, "ts": float(step), "values": values})


def test_a_long_series_keeps_evenly_spaced_points_and_its_newest_and_a_rare_one_keeps_all(store):
    store.metrics_keep = 100
    job, attempt = running_attempt(store)
    lines = [_line(i, loss=1 / (i + 1), **({"acc": i / 10_000} if i % 500 == 0 else {})) for i in range(10_000)]
    end = _metric_lines(store, attempt, lines, 37)
    loss = [m.step for m in store.metrics(job.id) if m.name == "loss"]
    # 10,000 points under a keep of 100: the stride doubled to 128, every 128th point stays, and the newest
    assert loss == [*range(0, 10_000, 128), 9999]
    assert [m.step for m in store.metrics(job.id) if m.name == "acc"] == list(range(0, 10_000, 500))
    # a resend of what was received changes nothing; the next report goes on from the newest
    _metric_lines(store, attempt, lines[:100], 50)
    assert [m.step for m in store.metrics(job.id) if m.name == "loss"] == loss
    _metric_lines(store, attempt, [_line(10_000, loss=0.5)], 1, start=end)
    assert [m.step for m in store.metrics(job.id) if m.name == "loss"] == [*range(0, 10_000, 128), 10_000]
    with store.read() as s:  # thinned in the database, not only in what is read
        assert s.scalar(select(func.count()).select_from(Metric).where(Metric.job_id == job.id)) == 79 + 20 + 1


def test_points_of_metric_names_past_the_limit_are_not_stored_and_the_log_says_so_once(store, monkeypatch):
    monkeypatch.setattr(metric_series, "NAMES", 3)
    job, attempt = running_attempt(store)
    end = _metric_lines(store, attempt, [_line(i, **{f"m{i}": 1.0, "loss": 0.1}) for i in range(5)], 1)
    _metric_lines(store, attempt, [_line(5, m9=1.0, m0=2.0)], 1, start=end)
    assert sorted({m.name for m in store.metrics(job.id)}) == ["loss", "m0", "m1"]
    assert [m.value for m in store.metrics(job.id) if m.name == "m0"] == [1.0, 2.0]
    assert _log_of(store, job.id).count(metric_series.dropped_note()) == 1


def test_with_metrics_keep_zero_every_point_is_kept(store):
    store.metrics_keep = 0
    job, attempt = running_attempt(store)
    _metric_lines(store, attempt, [_line(i, loss=float(i)) for i in range(3000)], 500)
    assert [m.step for m in store.metrics(job.id)] == list(range(3000))


def test_what_a_job_prints_or_logs_is_stored_whatever_bytes_it_holds(store):
    job, attempt = running_attempt(store)
    store.append_log(attempt.id, 0, 0, "a\x00b\n")  # PostgreSQL's text refuses a NUL: every report failed
    assert _log_of(store, job.id) == "a\ufffdb\n"
    lines = [json.dumps({"step": 2**40, "ts": 1.0, "values": {"lo\x00ss": 0.5, "": 1.0}}),  # a step counting tokens
             '{"step": 1, "ts": "soon", "values": {"x": 1}}', '{"step": 1, "values": [1]}', '[1, 2]',
             json.dumps({"step": 1e300, "ts": 2.0, "values": {"y": 2.0}})]
    store.add_metrics(attempt.id, 0, 0, lines)
    assert [(m.step, m.name, m.value) for m in store.metrics(job.id)] == [(2**40, "lo\ufffdss", 0.5), (None, "y", 2.0)]


def test_a_log_is_read_in_pages_of_bounded_size_that_join_into_the_whole(store):
    store.log_keep = 0
    job, attempt = running_attempt(store)
    parts = [chr(ord("a") + i) * 100_000 for i in range(10)]  # ten reports of 100 KB, as a chatty job sends
    for i, part in enumerate(parts):
        store.append_log(attempt.id, 0, i * 100_000, part)
    pages, cursor = [], 0
    while True:
        chunks, cursor = store.read_logs(job.id, after=cursor, max_bytes=250_000)
        if not chunks:
            break
        pages.append("".join(c.data for c in chunks))
    # each page ends with the chunk that passes the bound: three chunks, not all ten at once
    assert [len(p) for p in pages] == [300_000, 300_000, 300_000, 100_000]
    assert "".join(pages) == "".join(parts)
    assert [c for _, c in store.read_log_cursors(job.id, after=0, max_bytes=1)] == store.read_logs(job.id, limit=1)[0]


def test_on_sqlite_a_write_holds_the_write_lock_from_its_start_and_a_read_inside_it_does_not(tmp_path):
    import sqlite3

    from sqlalchemy import text

    store = Store(f"sqlite:///{tmp_path / 'trainyard.db'}")
    other = sqlite3.connect(tmp_path / "trainyard.db", timeout=0, isolation_level=None)  # another process's writer
    try:
        with store.write():  # nothing written yet: the lock is taken by BEGIN IMMEDIATE itself
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
            with store.read() as r:  # on a connection of its own, a read (no second writer: no wait)
                assert r.execute(text("select count(*) from jobs")).scalar() == 0
        with store.read() as r:
            r.execute(text("select count(*) from jobs")).scalar()
            other.execute("BEGIN IMMEDIATE")  # a read takes no write lock
            other.execute("ROLLBACK")
        # and reads see one snapshot: a commit by another writer between two statements is not seen
        with store.read() as r:
            before = r.execute(text("select count(*) from jobs")).scalar()
            store.create_job(parse_job("command: echo hi"))
            assert r.execute(text("select count(*) from jobs")).scalar() == before
    finally:
        other.close()
        store.close()


def test_the_tail_of_a_log_reads_back_its_last_lines_per_attempt_and_replica(store):
    job, attempt = running_attempt(store)
    offset = 0
    for text in ["one\ntwo\nthr", "ee\nfour\n", "five\n"]:
        store.report(attempt.id, 0, token_hash=H, running=True, log=(offset, text))
        offset += len(text)
    chunks, cursor = store.read_log_tail(job.id, 3)
    assert "".join(c.data for c in chunks) == "three\nfour\nfive\n"
    assert cursor == store.read_logs(job.id)[1]  # following from here brings only what comes next
    assert store.read_log_tail(job.id, 2, attempt=2) == ([], 0)
    assert store.read_log_tail(job.id, 2, replica=1) == ([], 0)
    assert "".join(c.data for c in store.read_log_tail(job.id, 1, attempt=1, replica=0)[0]) == "five\n"


def test_a_listing_keeps_the_jobs_a_label_selector_picks_as_the_selector_itself_would(store):
    from trainyard.spec.job_query import JobFilter
    from trainyard.spec.label_selector import matches, parse_selector

    made = {store.create_job(parse_job(f"command: x\nlabels: {labels}")).id: labels for labels in (
        {"experiment": "baseline", "team.example.com/owner": "ann"},
        {"experiment": "baseline", "team.example.com/owner": "bob"},
        {"experiment": "other", "stage": ""}, {})}

    def ids(text: str) -> set[str]:
        return {j.id for j in store.list_jobs(JobFilter(labels=parse_selector(text, "label"))).items}

    for text in ["experiment=baseline", "experiment=baseline,team.example.com/owner=ann", "experiment=nope",
                 "missing=", "stage=", "experiment!=baseline", "experiment in (other, baseline)",
                 "experiment notin (other)", "stage", "!stage", "!experiment", "experiment,!stage",
                 "team.example.com/owner in (bob),experiment!=other"]:
        expected = {i for i, labels in made.items() if matches(labels, parse_selector(text, "label"))}
        assert ids(text) == expected, text
    assert len(ids("experiment notin (other)")) == 3  # the job with no labels too, as Kubernetes has it
    page = store.list_jobs(JobFilter(labels=parse_selector("experiment=baseline", "label")), count=True, limit=1)
    assert len(page.items) == 1 and page.total == 2
