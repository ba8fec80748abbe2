"""Stack requests as rows, on SQLite and on a real PostgreSQL server: a launcher answers only its own attempt's
and replica's requests, once; an unanswered one expires; a job keeps its newest 20; they go with the job."""

import pytest

from trainyard.spec import parse_job
from trainyard.spec.reports import StackAnswer, StackAsk
from trainyard.status import JobStatus
from trainyard.store import Store
from trainyard.store import stacks as stacks_mod
from trainyard.store.deletion import JobDeletion
from trainyard.store.stacks import KEEP, StackStore

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    yield s
    s.close()


def test_requests_answers_expiry_and_what_is_kept(store, monkeypatch):
    job = store.create_job(parse_job("command: x\nreplicas: 2\ndistributed: torch"))
    rows = StackStore(store)
    a0, a1 = rows.request(job.id, f"{job.id}-1", [(0, "n0"), (1, "n1")], "alice", native=True)
    assert (a0.status, a0.node, a0.requested_by, a1.replica, a1.native, a1.locals) == \
        ("pending", "n0", "alice", 1, True, False)
    assert rows.pending() == {(f"{job.id}-1", 0): [StackAsk(id=a0.id, native=True)],
                              (f"{job.id}-1", 1): [StackAsk(id=a1.id, native=True)]}

    # asked again while pending (the same options): the same request; other options: a new one
    assert [d.id for d in rows.request(job.id, f"{job.id}-1", [(0, "n0")], "bob", native=True)] == [a0.id]
    [other] = rows.request(job.id, f"{job.id}-1", [(0, "n0")], "bob")
    assert other.id not in (a0.id, a1.id)
    assert rows.answer(f"{job.id}-1", 0, [StackAnswer(id=other.id, text="plain")]) == 1

    # another replica's or attempt's launcher cannot answer: nothing changes
    assert rows.answer(f"{job.id}-1", 1, [StackAnswer(id=a0.id, text="forged")]) == 0
    assert rows.answer(f"{job.id}-2", 0, [StackAnswer(id=a0.id, text="forged")]) == 0
    assert rows.answer(f"{job.id}-1", 0, [StackAnswer(id=a0.id, text="Thread 1 (idle)")]) == 1
    assert rows.answer(f"{job.id}-1", 0, [StackAnswer(id=a0.id, text="again")]) == 0  # once
    assert rows.answer(f"{job.id}-1", 1, [StackAnswer(id=a1.id, error="ptrace: Operation not permitted")]) == 1
    got = {d.id: d for d in rows.of_job(job.id)}
    assert (got[a0.id].status, got[a0.id].text, got[a0.id].native) == ("done", "Thread 1 (idle)", True)
    assert (got[a1.id].status, got[a1.id].error) == ("failed", "ptrace: Operation not permitted")
    assert rows.pending() == {}

    # one never answered is pending, then expired
    [late] = rows.request(job.id, f"{job.id}-1", [(0, "n0")], "alice")
    now = stacks_mod.time.time()
    monkeypatch.setattr(stacks_mod.time, "time", lambda: now + stacks_mod.EXPIRE + 1)
    assert rows.pending() == {} and rows.of_job(job.id)[0].status == "expired"
    monkeypatch.undo()

    # the newest KEEP are kept, newest first
    for i in range(KEEP):
        [d] = rows.request(job.id, f"{job.id}-1", [(0, "n0")], None, with_locals=True)  # not the pending `late`
        rows.answer(f"{job.id}-1", 0, [StackAnswer(id=d.id, text=str(i))])
    kept = rows.of_job(job.id)
    assert len(kept) == KEEP and late.id not in {d.id for d in kept}
    assert [d.id for d in kept] == sorted((d.id for d in kept), reverse=True)

    # and they go with the job (its foreign key would refuse the job's delete otherwise)
    assert store.request_cancel(job.id) is JobStatus.CANCELLED  # pending: cancelled at once
    assert [d.job_id for d in JobDeletion(store).delete([job.id])] == [job.id]
    assert rows.of_job(job.id) == []


def test_a_server_hears_of_another_s_requests_within_a_second_and_forgets_what_was_answered(store, monkeypatch):
    from trainyard.services import stacks as service_mod
    from trainyard.services.stacks import REFRESH, StackService

    job = store.create_job(parse_job("command: x"))
    here, there = StackService(store, jobs=None, audit=None), StackService(store, jobs=None, audit=None)
    attempt, clock = f"{job.id}-1", service_mod.time.monotonic()
    monkeypatch.setattr(service_mod.time, "monotonic", lambda: clock)
    assert there.asked(attempt, 0) == []  # read now: nothing yet
    [d] = here.rows.request(job.id, attempt, [(0, None)], None, with_locals=True)  # as another server's would
    assert there.asked(attempt, 0) == []  # its copy is under a second old
    monkeypatch.setattr(service_mod.time, "monotonic", lambda: clock + REFRESH)
    assert there.asked(attempt, 0) == [StackAsk(id=d.id, locals=True)] and there.asked(attempt, 1) == []
    there.answered(attempt, 0, [StackAnswer(id=d.id, text="x")])
    assert there.asked(attempt, 0) == []  # not asked again before the next read
    assert here.rows.of_job(job.id)[0].status == "done"
