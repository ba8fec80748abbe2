"""The last lines of a log kept as chunks whose edges fall anywhere in a line (trainyard.store.log_tail)."""

import pytest

from trainyard.spec.records import LogChunk
from trainyard.store.log_tail import last_lines


def tail(texts: list[str], n: int, max_bytes: int = 1 << 30) -> tuple[str, int, int]:
    rows = [(10 + i, LogChunk(attempt=1, offset=i, data=t)) for i, t in enumerate(texts)]
    chunks, cursor = last_lines(reversed(rows), n, max_bytes)
    return "".join(c.data for c in chunks), cursor, len(chunks)


@pytest.mark.parametrize("texts, n, want", [
    (["a\nb\n", "c\nd", "e\n"], 2, "c\nde\n"),       # a line across two chunks is one line
    (["a\nb\n", "c\nd", "e\n"], 1, "de\n"),
    (["a\nb\n", "c\nd", "e"], 2, "c\nde"),           # the last line without its break counts
    (["a\n", "b\n", "c\n"], 2, "b\nc\n"),
    (["a\n", "b\n", "c\n"], 3, "a\nb\nc\n"),
    (["a\nb\n", "c\nd", "e"], 10, "a\nb\nc\nde"),    # fewer lines than asked: all of them
    (["a\n\n\nb\n"], 3, "\n\nb\n"),                   # empty lines are lines
])
def test_the_last_n_lines_whatever_the_chunk_edges(texts, n, want):
    text, cursor, _ = tail(texts, n)
    assert text == want
    assert cursor == 10 + len(texts) - 1  # the newest chunk: following goes on after it


def test_no_lines_still_gives_the_cursor_to_follow_from_and_an_empty_log_gives_0():
    assert tail(["a\n", "b\n"], 0) == ("", 11, 0)
    assert tail([], 5) == ("", 0, 0)


def test_chunks_before_the_cut_are_not_read_and_the_cut_one_starts_at_its_line():
    read = []

    def newest_first():
        for i, t in reversed(list(enumerate(["old\n" * 1000, "x\ny\n", "z\n"]))):
            read.append(i)
            yield i + 1, LogChunk(attempt=1, offset=0, data=t)

    chunks, _ = last_lines(newest_first(), 2)
    assert [c.data for c in chunks] == ["y\n", "z\n"] and read == [2, 1]


def test_a_log_without_breaks_stops_at_the_bound():
    text, _, count = tail(["a" * 100] * 50, 3, max_bytes=250)
    assert count == 3 and text == "a" * 300
