"""Changing a job's labels after submit, on SQLite and on a real PostgreSQL server: the spec and the label
rows change together; a server that remembered the spec before (the same or another, sharing the database)
reads the new labels, in a read, a listing, and the job its last report ends; what is refused loses nothing."""

import pytest

from trainyard.errors import Conflict, InvalidSpec, JobNotFound
from trainyard.services.attempts import _conclude
from trainyard.spec import parse_job
from trainyard.spec.job_query import JobFilter
from trainyard.spec.label_selector import parse_selector
from trainyard.status import AttemptStatus, JobStatus, Reason
from trainyard.store import Store
from tests.integration.test_store import H
from tests.support.at_once import at_once

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    yield s
    s.close()


def labelled(store: Store, selector: str) -> list[str]:
    where = JobFilter(labels=parse_selector([selector], "label"))
    return [j.id for j in store.list_jobs(where).items]


def test_labels_change_in_the_spec_and_the_filters_for_every_server(store, db_url):
    job = store.create_job(parse_job("command: x\nlabels: {experiment: baseline, lr: '0.1'}"))
    other = Store(db_url, run_migrations=False)  # another server on the same database
    try:
        assert other.get_job(job.id).spec.labels == {"experiment": "baseline", "lr": "0.1"}  # now in its memory

        before, after = store.relabel(job.id, {"keep": "yes", "lr": None})

        assert (before, after) == ({"experiment": "baseline", "lr": "0.1"}, {"experiment": "baseline", "keep": "yes"})
        for s in (store, other):
            assert s.get_job(job.id).spec.labels == after
            assert s.list_jobs().items[0].spec.labels == after
            assert labelled(s, "keep=yes") == [job.id] and labelled(s, "lr") == []
            assert s.get_job(job.id).spec.command == "x"  # the rest of the spec as it was
    finally:
        other.close()


def test_a_label_set_to_another_value_changes_only_when_asked_to_and_nothing_is_lost(store):
    job = store.create_job(parse_job("command: x\nlabels: {stage: dev}"))
    with pytest.raises(Conflict, match="already has label stage=dev: ask to overwrite"):
        store.relabel(job.id, {"stage": "prod", "new": "1"})
    assert store.get_job(job.id).spec.labels == {"stage": "dev"}  # neither change made
    assert store.relabel(job.id, {"stage": "dev"}) == ({"stage": "dev"}, {"stage": "dev"})  # the same: no change
    assert store.relabel(job.id, {"stage": "prod"}, overwrite=True)[1] == {"stage": "prod"}
    assert labelled(store, "stage=prod") == [job.id] and labelled(store, "stage=dev") == []

    many = {f"k{i}": "v" for i in range(32)}
    with pytest.raises(InvalidSpec, match="at most 32 labels; this would leave 33"):
        store.relabel(job.id, many)
    assert store.get_job(job.id).spec.labels == {"stage": "prod"}
    with pytest.raises(JobNotFound):
        store.relabel("j-0000000000", {"a": "b"})


def test_an_ended_job_read_before_shows_its_new_labels_and_its_last_report_ends_it_with_them(store, db_url):
    done = {"status": AttemptStatus.SUCCEEDED, "exit_code": 0, "reason": Reason.SUCCEEDED, "message": None,
            "conclude": _conclude}
    other = Store(db_url, run_migrations=False)  # another server, which changes the labels
    try:
        # a running job whose spec this store remembers, relabelled by the other before its last report here
        job = store.create_job(parse_job("command: x\nlabels: {a: '1'}"))
        attempt = store.admit(job.id, [("n", [])], token_hash=H)
        other.relabel(job.id, {"b": "2"})
        _, _, (ended, over) = store.report(attempt.id, 0, token_hash=H, running=True, end=done)
        assert over and ended.status == AttemptStatus.SUCCEEDED
        info = store.get_job(job.id)  # an ended job: from the record the report built, then from memory
        assert info.status == JobStatus.SUCCEEDED and info.spec.labels == {"a": "1", "b": "2"}
        # an ended job's labels still change: the store that changed them forgets its record at once, and a
        # listing elsewhere, which reads the row, sees the change although a record is kept there
        assert other.get_job(job.id).spec.labels == {"a": "1", "b": "2"}
        store.relabel(job.id, {"a": None})
        assert store.get_job(job.id).spec.labels == {"b": "2"}
        assert [j.spec.labels for j in other.list_jobs().items] == [{"b": "2"}]
    finally:
        other.close()


def test_two_changes_at_once_to_other_keys_are_both_kept(store, db_url):
    job = store.create_job(parse_job("command: x"))
    stores = [Store(db_url, run_migrations=False) for _ in range(4)]  # as many servers
    errors: list[Exception] = []

    def change(s: Store, i: int) -> None:
        try:
            for n in range(5):
                s.relabel(job.id, {f"k{i}": str(n)}, overwrite=True)
        except Exception as e:  # noqa: BLE001  (asserted below)
            errors.append(e)

    try:
        at_once(lambda i: change(stores[i], i), len(stores))
    finally:
        for s in stores:
            s.close()
    assert errors == []
    assert store.get_job(job.id).spec.labels == {f"k{i}": "4" for i in range(4)}
    assert labelled(store, "k3=4") == [job.id]


def test_a_key_or_value_ending_in_a_newline_is_refused():
    from pydantic import ValidationError

    from trainyard.spec.labels import LabelChange

    for labels in ({"exp\n": "v"}, {"exp": "v\n"}):
        with pytest.raises(ValidationError, match="label (key|value)"):
            LabelChange(labels=labels)
    with pytest.raises(InvalidSpec) as refused:  # at submit too
        parse_job("command: x\nlabels: {\"exp\\n\": v}")
    assert refused.value.errors[0]["message"].startswith(f"label key {'exp' + chr(10)!r}")
