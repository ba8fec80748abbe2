"""Requests to launchers as rows, on SQLite and on a real PostgreSQL server: a launcher answers only its own
attempt's and replica's requests, of their kind, once; an unanswered one expires (an exec after its own timeout
too); a job keeps its newest 20 of each kind; they go with the job."""

import pytest

from trainyard.spec import parse_job
from trainyard.spec.reports import ExecAnswer, ExecAsk, StackAnswer, StackAsk
from trainyard.status import JobStatus
from trainyard.store import Store
from trainyard.store import replica_requests as stacks_mod
from trainyard.store.deletion import JobDeletion
from trainyard.store.replica_requests import KEEP, Pending, RequestRows

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    yield s
    s.close()


def test_requests_answers_expiry_and_what_is_kept(store, monkeypatch):
    job = store.create_job(parse_job("command: x\nreplicas: 2\ndistributed: torch"))
    rows = RequestRows(store)
    a0, a1 = rows.request_stacks(job.id, f"{job.id}-1", [(0, "n0"), (1, "n1")], "alice", native=True)
    assert (a0.status, a0.node, a0.requested_by, a1.replica, a1.native, a1.locals) == \
        ("pending", "n0", "alice", 1, True, False)
    assert rows.pending() == {(f"{job.id}-1", 0): Pending([StackAsk(id=a0.id, native=True)], []),
                              (f"{job.id}-1", 1): Pending([StackAsk(id=a1.id, native=True)], [])}

    # asked again while pending (the same options): the same request; other options: a new one
    assert [d.id for d in rows.request_stacks(job.id, f"{job.id}-1", [(0, "n0")], "bob", native=True)] == [a0.id]
    [other] = rows.request_stacks(job.id, f"{job.id}-1", [(0, "n0")], "bob")
    assert other.id not in (a0.id, a1.id)
    assert rows.answer(f"{job.id}-1", 0, [StackAnswer(id=other.id, text="plain")]) == 1

    # another replica's or attempt's launcher cannot answer: nothing changes
    assert rows.answer(f"{job.id}-1", 1, [StackAnswer(id=a0.id, text="forged")]) == 0
    assert rows.answer(f"{job.id}-2", 0, [StackAnswer(id=a0.id, text="forged")]) == 0
    assert rows.answer(f"{job.id}-1", 0, [StackAnswer(id=a0.id, text="Thread 1 (idle)")]) == 1
    assert rows.answer(f"{job.id}-1", 0, [StackAnswer(id=a0.id, text="again")]) == 0  # once
    assert rows.answer(f"{job.id}-1", 1, [StackAnswer(id=a1.id, error="ptrace: Operation not permitted")]) == 1
    got = {d.id: d for d in rows.stacks_of(job.id)}
    assert (got[a0.id].status, got[a0.id].text, got[a0.id].native) == ("done", "Thread 1 (idle)", True)
    assert (got[a1.id].status, got[a1.id].error) == ("failed", "ptrace: Operation not permitted")
    assert rows.pending() == {}

    # one never answered is pending, then expired
    [late] = rows.request_stacks(job.id, f"{job.id}-1", [(0, "n0")], "alice")
    now = stacks_mod.time.time()
    monkeypatch.setattr(stacks_mod.time, "time", lambda: now + stacks_mod.EXPIRE + 1)
    assert rows.pending() == {} and rows.stacks_of(job.id)[0].status == "expired"
    monkeypatch.undo()

    # the newest KEEP are kept, newest first
    for i in range(KEEP):
        [d] = rows.request_stacks(job.id, f"{job.id}-1", [(0, "n0")], None, with_locals=True)  # not the pending `late`
        rows.answer(f"{job.id}-1", 0, [StackAnswer(id=d.id, text=str(i))])
    kept = rows.stacks_of(job.id)
    assert len(kept) == KEEP and late.id not in {d.id for d in kept}
    assert [d.id for d in kept] == sorted((d.id for d in kept), reverse=True)

    # and they go with the job (its foreign key would refuse the job's delete otherwise)
    assert store.request_cancel(job.id) is JobStatus.CANCELLED  # pending: cancelled at once
    assert [d.job_id for d in JobDeletion(store).delete([job.id])] == [job.id]
    assert rows.stacks_of(job.id) == []


def test_a_server_hears_of_another_s_requests_within_a_second_and_forgets_what_was_answered(store, monkeypatch):
    from trainyard.services import replica_requests as service_mod
    from trainyard.services.replica_requests import REFRESH, ReplicaRequests

    job = store.create_job(parse_job("command: x"))
    here, there = ReplicaRequests(store, jobs=None, audit=None), ReplicaRequests(store, jobs=None, audit=None)
    attempt, clock = f"{job.id}-1", service_mod.time.monotonic()
    monkeypatch.setattr(service_mod.time, "monotonic", lambda: clock)
    assert there.asked(attempt, 0) == Pending([], [])  # read now: nothing yet
    [d] = here.rows.request_stacks(job.id, attempt, [(0, None)], None, with_locals=True)  # as another server's would
    assert there.asked(attempt, 0) == Pending([], [])  # its copy is under a second old
    monkeypatch.setattr(service_mod.time, "monotonic", lambda: clock + REFRESH)
    assert there.asked(attempt, 0).stacks == [StackAsk(id=d.id, locals=True)] and not there.asked(attempt, 1).stacks
    there.answered(attempt, 0, [StackAnswer(id=d.id, text="x")])
    assert there.asked(attempt, 0) == Pending([], [])  # not asked again before the next read
    assert here.rows.stacks_of(job.id)[0].status == "done"


def test_a_command_to_run_is_answered_once_by_its_own_launcher_and_expires_after_its_timeout(store, monkeypatch):
    job = store.create_job(parse_job("command: x"))
    rows, attempt = RequestRows(store), f"{job.id}-1"
    made = rows.request_exec(job.id, attempt, 0, "n0", ["nvidia-smi", "-L"], 120.0, "alice")
    assert (made.status, made.argv, made.timeout, made.requested_by) == \
        ("pending", ["nvidia-smi", "-L"], 120.0, "alice")
    asked = ExecAsk(id=made.id, argv=["nvidia-smi", "-L"], timeout=120.0)
    assert rows.pending() == {(attempt, 0): Pending([], [asked])}
    # a stack answer cannot answer it, nor another replica's launcher
    assert rows.answer(attempt, 0, [StackAnswer(id=made.id, text="x")]) == 0
    assert rows.answer(attempt, 1, [ExecAnswer(id=made.id, exit_code=0)]) == 0
    # a minute past the request it still waits (its own two minutes first), then expires
    now = stacks_mod.time.time()
    monkeypatch.setattr(stacks_mod.time, "time", lambda: now + stacks_mod.EXPIRE + 60)
    assert rows.exec_of(job.id, made.id).status == "pending"
    monkeypatch.setattr(stacks_mod.time, "time", lambda: now + stacks_mod.EXPIRE + 121)
    assert rows.exec_of(job.id, made.id).status == "expired" and rows.pending() == {}
    monkeypatch.undo()
    assert rows.answer(attempt, 0, [ExecAnswer(id=made.id, exit_code=3, output="GPU 0: H100")]) == 1
    done = rows.exec_of(job.id, made.id)
    assert (done.status, done.exit_code, done.output) == ("done", 3, "GPU 0: H100")
    failed = rows.request_exec(job.id, attempt, 0, "n0", ["sleep", "9"], 1.0, "alice")
    rows.answer(attempt, 0, [ExecAnswer(id=failed.id, error="still running after 1s: stopped")])
    assert rows.exec_of(job.id, failed.id).status == "failed"
    assert rows.exec_of(job.id, 10**9) is None and rows.exec_of("j-other", made.id) is None
    assert rows.stacks_of(job.id) == []  # the kinds apart
