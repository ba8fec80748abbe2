"""A replica's log past the server's ``log_keep`` keeps its first half and at most its last half: never more
than the bound, and never much less (a step of an eighth of half), whatever the size of the reports."""

from __future__ import annotations

import pytest

from tests.integration.test_store import H, running_attempt
from trainyard.spec import parse_job
from trainyard.store import Store
from trainyard.store.log_bound import MARK, step_of
from trainyard.store.telemetry import log_note

pytestmark = pytest.mark.postgres

KEEP = 4000


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    s.log_keep = KEEP
    yield s
    s.close()


def _chunks(store, job_id):  # noqa: ANN001, F811
    return store.read_logs(job_id, limit=100_000)[0]


@pytest.mark.parametrize("report", [7, 121, 997, 2100, 3999, 4001, 9000])
def test_the_kept_log_never_passes_the_bound_and_keeps_its_ends(store, report):
    job, attempt = running_attempt(store)
    text = "".join(f"line {i:05d}\n" for i in range(1000))  # 11,000 bytes
    for at in range(0, len(text), report):  # every report is checked, not only the last
        store.append_log(attempt.id, 0, at, text[at:at + report])
        end = min(at + report, len(text))
        chunks = _chunks(store, job.id)
        if end <= KEEP:
            assert "".join(c.data for c in chunks) == text[:end]
            continue
        kept = "".join(c.data for c in chunks if c.offset >= 0)
        # the kept end starts with a line break and a mark where a line runs over a cut (test_log_keep_lines)
        tail = kept[KEEP // 2:].removeprefix("\n").removeprefix(MARK)
        lead = kept[KEEP // 2:len(kept) - len(tail)]
        assert lead in ("", "\n", MARK, "\n" + MARK), (report, end, lead)
        assert len(kept.encode()) - len(lead.encode()) <= KEEP, (report, end, len(kept))
        assert kept[:KEEP // 2] == text[:KEEP // 2] and text[:end].endswith(tail), (report, end)
        assert KEEP // 2 - step_of(KEEP) <= len(tail) < KEEP // 2, (report, end, len(tail))
        assert [c.offset for c in chunks if c.data == log_note(KEEP)] == [-1]
        if end >= KEEP + KEEP // 2:  # the chunks that were kept end before the log passed are gone: the note
            # stands where the middle went
            assert "".join(c.data for c in chunks) == text[:KEEP // 2] + log_note(KEEP) + lead + tail
    assert len(_chunks(store, job.id)) < 2 * 2000 // min(report, 121) + 10  # the middle is gone from the database


def test_a_cut_inside_a_character_keeps_whole_characters_under_the_bound(store):
    job, attempt = running_attempt(store)
    text = "é€😀" * 3000  # 2, 3 and 4 bytes: the cuts fall inside characters
    raw, at = text.encode(), 0
    for i in range(0, len(text), 333):
        part = text[i:i + 333]
        store.append_log(attempt.id, 0, at, part)
        at += len(part.encode())
    chunks = _chunks(store, job.id)
    head, note, tail = "".join(c.data for c in chunks).partition(log_note(KEEP))
    assert tail.startswith(MARK)  # no line ends: the kept end starts inside one
    tail = tail[len(MARK):]
    assert "\ufffd" not in head + tail and raw.startswith(head.encode()) and raw.endswith(tail.encode())
    assert KEEP // 2 - 4 < len(head.encode()) <= KEEP // 2
    assert KEEP // 2 - step_of(KEEP) - 4 <= len(tail.encode()) < KEEP // 2


def test_several_replicas_are_bounded_each_on_its_own(store):
    job = store.create_job(parse_job("command: x\nreplicas: 2\ndistributed: torch"))
    attempt = store.admit(job.id, [("a", []), ("b", [])], token_hash=H)
    text = "x" * 10_000
    for at in range(0, len(text), 500):
        for replica in (0, 1):
            store.append_log(attempt.id, replica, at, text[at:at + 500])
    for replica in (0, 1):
        chunks = store.read_logs(job.id, replica=replica, limit=100_000)[0]
        assert KEEP - step_of(KEEP) <= sum(len(c.data) for c in chunks if c.offset >= 0) <= KEEP


def test_a_follower_never_gets_again_bytes_it_had_when_the_log_passes_the_bound(store):
    # given a log under the bound whose second report spans the head's end and the kept end's start (0..1650,
    # 1650..3300: the first cut keeps from 2500), read by a follower as it comes
    job, attempt = running_attempt(store)
    text = "".join(f"line {i:05d}\n" for i in range(400))
    store.append_log(attempt.id, 0, 0, text[:1650])
    store.append_log(attempt.id, 0, 1650, text[1650:3300])
    had, cursor = store.read_logs(job.id)
    # when the next report passes the bound
    store.append_log(attempt.id, 0, 3300, text[3300:])
    # then what the follower reads next is the note and the new bytes: none of the bytes it had come again
    new = store.read_logs(job.id, after=cursor)[0]
    assert [(c.offset, c.data) for c in new] == [(-1, log_note(KEEP)), (3300, text[3300:])]
    # and a reader from the start reads the head, the kept end from before the bound (on a line of its own,
    # marked: it starts inside "line 00227"), the note and the new bytes
    whole = "".join(c.data for c in _chunks(store, job.id))
    assert whole == text[:2000] + "\n" + MARK + text[2500:3300] + log_note(KEEP) + text[3300:]
    assert "".join(c.data for c in had) == text[:3300]
