"""A replica's log past the server's ``log_keep``, read from the start, reads as lines: the head's open last line
ends, the note stands on lines of its own, and the kept end's first line, where the cut fell inside it, starts with
the mark that says it is not whole. A follower gets no byte it had again."""

from __future__ import annotations

import pytest

from tests.integration.test_log_keep import KEEP, store  # noqa: F401  (store is a fixture: KEEP bytes kept)
from tests.integration.test_store import running_attempt
from trainyard.store.log_bound import MARK
from trainyard.store.telemetry import log_note

pytestmark = pytest.mark.postgres

NOTE = log_note(KEEP)  # KEEP 4000 bytes: the first 2000 and at most the last 2000 stay
LINES = "".join(f"line {i:05d}\n" for i in range(600))  # lines of 11 bytes: 2000 and 2500 fall inside lines


def reported(store, text: str, ends: list[int]):  # noqa: ANN001, ANN201
    """A running job whose replica reported ``text`` up to each of ``ends`` in turn: (job, cursor of a follower
    that read all but the last report as it came, the chunks it read after that)."""
    job, attempt = running_attempt(store)
    start, cursor = 0, 0
    for end in ends:
        cursor = store.read_logs(job.id, limit=100_000)[1]
        store.append_log(attempt.id, 0, start, text[start:end])
        start = end
    return job, store.read_logs(job.id, after=cursor, limit=100_000)[0]


def whole(store, job_id: str) -> str:  # noqa: ANN001
    return "".join(c.data for c in store.read_logs(job_id, limit=100_000)[0])


@pytest.mark.parametrize("ends", [[1650, 3300, 4400], [1650, 2500, 3300, 4400]])
def test_the_heads_open_line_ends_and_the_kept_ends_first_line_is_marked_before_the_note(store, ends):
    # given a log whose reports under the bound reach 3300 (the second list stores a chunk starting at 2500)
    # when the next report passes the bound: the first cut keeps from 2500, inside "line 00227"
    job, followed = reported(store, LINES, ends)
    # then a reader from the start reads the head ending its line, what was kept from before the bound starting on
    # a marked line of its own, then the note and the new bytes: no line of the head runs into one of the kept end
    assert whole(store, job.id) == LINES[:2000] + "\n" + MARK + LINES[2500:3300] + NOTE + LINES[3300:4400]
    assert "line 0018\n" + MARK + "e 00227\n" in whole(store, job.id)
    # and a follower reads the note and the new bytes only, none it had
    assert [(c.offset, c.data) for c in followed] == [(-1, NOTE), (3300, LINES[3300:4400])]


def test_the_mark_stands_in_bytes_the_cut_dropped(store):
    # given a log cut at 2500, inside a line
    job, _ = reported(store, LINES, [1650, 3300, 4400])
    # then the chunk that starts the kept end holds its line break and mark at the offsets just before 2500: a
    # reader that places bytes by offset drops them with the bytes the cut dropped
    first = [c for c in store.read_logs(job.id, limit=100_000)[0] if c.offset >= 2000][0]
    lead = ("\n" + MARK).encode()
    assert first.offset == 2500 - len(lead) and first.data.encode().startswith(lead)


def test_once_the_kept_end_moves_past_what_was_kept_from_before_the_note_stands_at_the_gap(store):
    # given a log cut at 2500, then one whose kept end moves to 4750, inside "line 00431"
    job, followed = reported(store, LINES, [1650, 3300, 4400, 6600])
    # then the head's open line is ended by the note, and the kept end's first line is marked
    assert whole(store, job.id) == LINES[:2000] + NOTE + MARK + LINES[4750:6600]
    # and a follower that had the log up to 4400 reads the report from the kept end on, its first line marked
    assert [(c.offset, c.data) for c in followed] == [(4750 - len(MARK.encode()), MARK + LINES[4750:6600])]


def test_a_follower_reads_the_note_and_the_report_of_a_cut_that_drops_the_newest_chunk(store):
    # given a log whose report past the bound moves the kept end past every chunk it had (to 4250): on SQLite,
    # a row written after the newest is deleted takes its id, which a follower that read it has passed
    job, followed = reported(store, LINES, [1650, 3300, 6000])
    # then a follower that had the log up to 3300 reads the note and the report from the kept end on
    assert [(c.offset, c.data) for c in followed] == [(-1, NOTE), (4250 - len(MARK.encode()), MARK + LINES[4250:6000])]
    assert whole(store, job.id) == LINES[:2000] + NOTE + MARK + LINES[4250:6000]


def test_one_report_that_passes_the_bound_from_the_head_marks_the_kept_ends_first_line(store):
    # given a log that passes the bound in one report, from under the head's end
    job, _ = reported(store, LINES, [1000, 6600])
    # then its kept end, written after the note, starts on a marked line
    assert whole(store, job.id) == LINES[:2000] + NOTE + MARK + LINES[4750:6600]


def test_a_cut_at_line_edges_adds_nothing(store):
    # given lines of 10 bytes: the head ends, and the kept end starts, at a line's edge
    text = "".join(f"line {i:04d}\n" for i in range(660))
    job, _ = reported(store, text, [1650, 3300, 4400])
    # then the log reads as it was printed, but for the middle, and the note
    assert whole(store, job.id) == text[:2000] + text[2500:3300] + NOTE + text[3300:4400]
    job, _ = reported(store, text, [1650, 3300, 4400, 6600])
    assert whole(store, job.id) == text[:2000] + NOTE + text[4750:6600]
