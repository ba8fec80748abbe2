"""Reading output.log and metrics.jsonl by byte offset, without splitting characters or lines."""

from __future__ import annotations

from trainyard.launch import tail


def test_utf8_cut_keeps_whole_characters():
    euro = "€".encode()  # 3 bytes
    assert tail.utf8_cut(b"abc") == 3
    assert tail.utf8_cut(b"ab" + euro) == 5
    assert tail.utf8_cut(b"ab" + euro[:1]) == 2
    assert tail.utf8_cut(b"ab" + euro[:2]) == 2
    emoji = "🙂".encode()  # 4 bytes
    assert tail.utf8_cut(emoji[:3]) == 0
    assert tail.utf8_cut(b"x" + emoji) == 5


def test_utf8_cut_leaves_invalid_bytes_to_replace():
    assert tail.utf8_cut(b"ab\x80\x80\x80\x80") == 6
    assert tail.utf8_cut(b"ab\xff") == 3


def test_log_chunk_holds_back_a_split_character_until_it_completes(tmp_path):
    log = tmp_path / "output.log"
    log.write_bytes(b"caf" + "é".encode()[:1])
    text, n = tail.log_chunk(str(log), 0, final=False)
    assert (text, n) == ("caf", 3)
    with open(log, "ab") as f:
        f.write("é".encode()[1:] + b"!\n")
    text, n = tail.log_chunk(str(log), 3, final=False)
    assert (text, n) == ("é!\n", 4)


def test_log_chunk_final_sends_broken_tail_as_replacement(tmp_path):
    log = tmp_path / "output.log"
    log.write_bytes(b"ok\xe2\x82")
    text, n = tail.log_chunk(str(log), 0, final=True)
    assert text == "ok\ufffd" and n == 4


def test_log_chunk_caps_size_and_counts_bytes_not_characters(tmp_path):
    log = tmp_path / "output.log"
    log.write_bytes("é".encode() * 10)  # 20 bytes
    text, n = tail.log_chunk(str(log), 0, final=True, cap=7)
    assert (text, n) == ("ééé", 6)  # the 7th byte starts a character: held back even when final
    text, n = tail.log_chunk(str(log), 6, final=True, cap=100)
    assert (text, n) == ("é" * 7, 14)


def test_log_chunk_invalid_bytes_advance_by_bytes_consumed(tmp_path):
    log = tmp_path / "output.log"
    log.write_bytes(b"a\xffb\n")
    assert tail.log_chunk(str(log), 0, final=False) == ("a\ufffdb\n", 4)


def test_log_chunk_missing_file_is_empty(tmp_path):
    assert tail.log_chunk(str(tmp_path / "nope"), 0, final=True) == ("", 0)


def test_metric_lines_only_complete_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"a": 1}\n\n{"b": 2}\n{"c"')
    lines, n = tail.metric_lines(str(path), 0)
    assert lines == ['{"a": 1}', '{"b": 2}'] and n == len(b'{"a": 1}\n\n{"b": 2}\n')
    assert tail.metric_lines(str(path), n) == ([], 0)
    with open(path, "ab") as f:
        f.write(b': 3}\n')
    assert tail.metric_lines(str(path), n) == (['{"c": 3}'], 9)


def test_a_metric_line_longer_than_a_chunk_is_passed_over_a_chunk_at_a_time_never_held_whole(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("x" * 50 + '\n{"a": 1}\n')
    offset, seen, held = 0, [], []
    while True:  # as the reporter reads: each time from where the last stopped
        lines, n = tail.metric_lines(str(path), offset, cap=16)
        if not n:
            break
        seen += lines
        held.append(n)
        offset += n
    assert max(held) <= 16  # never more than a chunk at a time, however long the line
    assert seen[-1] == '{"a": 1}' and offset == path.stat().st_size
    # the long line's last piece is a torn line, which the server skips
    assert all(line == "x" * len(line) for line in seen[:-1])


def test_log_chunk_holds_back_a_line_still_being_written_unless_final(tmp_path):
    log = tmp_path / "output.log"
    log.write_bytes(b'{"rank": 0}\n{"ra')  # a report read while the second line was being written
    assert tail.log_chunk(str(log), 0, final=False) == ('{"rank": 0}\n', 12)
    assert tail.log_chunk(str(log), 0, final=True) == ('{"rank": 0}\n{"ra', 16)
    log.write_bytes(b"epoch 1\n 10%\r 20%\r 3")  # a progress bar's redraws go as they come
    assert tail.log_chunk(str(log), 0, final=False) == ("epoch 1\n 10%\r 20%\r", 18)
    log.write_bytes(b"Enter a number: ")  # no line end at all: sent, not held until one comes
    assert tail.log_chunk(str(log), 0, final=False) == ("Enter a number: ", 16)
