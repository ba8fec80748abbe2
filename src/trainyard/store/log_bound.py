"""A replica's log past the server's bound (``log_keep``): its first half and its last half are kept, never more.

Bytes are counted as the log's own (its UTF-8 bytes, by the launcher's offsets); the note that says where the
middle went (offset -1) is not. The head is the log's first ``keep // 2`` bytes: a report that crosses that point
under the bound is stored as two chunks, split at the first character edge from it (:func:`head_edge`): the
first cut, when the log passes the bound, then takes from the head's last chunk at most the bytes of the character
that crosses that point, and never leaves part of one chunk (which followers had) to be written again after the
note. The kept end is cut at a step boundary ``tail`` past ``end - keep // 2``, and not cut again until the log's
end crosses ``tail + keep // 2``: between cuts it stays under half, so one report in a few, not every one, reads
and rewrites a chunk, and the kept end is never less than half minus a step (a step is an eighth of half, at most
:data:`DROP_EVERY`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import delete, select, update

from trainyard.store import tables as t

DROP_EVERY = 1 << 20  # bytes of log at most between two cuts of the kept end (past 16 MiB of bound)


def head_edge(raw: bytes, at: int) -> int:
    """The first character edge of ``raw`` from ``at`` (``len(raw)`` if none): where a chunk crossing the head's
    end is split under the bound, no character cut (the log may never pass it)."""
    while at < len(raw) and raw[at] & 0xC0 == 0x80:  # a UTF-8 continuation byte
        at += 1
    return at


def step_of(keep: int) -> int:
    return max(1, min(DROP_EVERY, keep // 2 // 8))


def tail_start(end: int, keep: int) -> int:
    """Where the kept end of a log of ``end`` bytes starts after a cut: the step boundary after ``end - half``,
    which the next cut's report crosses (so the end stays under half until then)."""
    half, step = keep // 2, step_of(keep)
    return ((end - half) // step + 1) * step


def kept_from(size: int, keep: int) -> int | None:
    """Where the kept end of a log of ``size`` bytes starts, or None while the log is under the bound: every
    report since the last cut ended in that cut's step (else it cut again), so its ``tail`` is the size's."""
    return tail_start(size, keep) if keep and size > keep else None


def crosses(have: int, end: int, keep: int) -> bool:
    """Whether a report from ``have`` to ``end`` (past the bound) must cut the kept end."""
    half, step = keep // 2, step_of(keep)
    return have <= keep or (have - half) // step != (end - half) // step


def cut_log(s, mine: tuple, first: bool, tail: int, keep: int,  # noqa: ANN001
            add: Callable[[int, bytes], None], note: bytes) -> None:
    """Drop what lies between the head and ``tail`` of the chunks ``mine`` selects, cutting the chunks that cross
    either edge; with ``first`` (the log passes the bound now) the head's last chunk is cut and ``note`` written.
    ``add(offset, raw)`` writes a chunk.

    Chunks kept from before the log passed stay before the note (a reader that follows the log has them
    already: written again after it, they would reach it twice) until the kept end moves past them."""
    c, half = t.LogChunk, keep // 2
    # a head chunk that reached past ``tail``: stored by a server that did not split chunks at the head's end
    # (head_edge); written again after the note, which a follower that had it reads twice
    spill = b""
    if first:
        h0 = s.execute(select(c.id, c.offset, c.data).where(*mine, c.offset >= 0, c.offset < half)
                       .order_by(c.offset.desc()).limit(1)).first()
        if h0 is not None:
            raw = h0.data.encode("utf-8")
            if h0.offset + len(raw) > half:
                s.execute(update(c).where(c.id == h0.id).values(data=text(raw[:half - h0.offset])))
                spill = raw[tail - h0.offset:]
    t0 = s.execute(select(c.id, c.offset, c.data).where(*mine, c.offset >= half, c.offset <= tail)
                   .order_by(c.offset.desc()).limit(1)).first()
    if t0 is not None:
        s.execute(delete(c).where(*mine, c.offset >= half, c.offset < t0.offset))
        if t0.offset < tail:
            rest = t0.data.encode("utf-8")[tail - t0.offset:]
            if rest:
                s.execute(update(c).where(c.id == t0.id).values(offset=tail, data=text(rest)))
            else:
                s.execute(delete(c).where(c.id == t0.id))
    if first:
        add(-1, note)  # offset -1: not bytes of the log
        if spill:
            add(tail, spill)


def text(raw: bytes) -> str:
    """``raw`` cut at a byte edge: a character split by the cut is dropped, not replaced (a replacement takes
    three bytes, which could pass the bound)."""
    return raw.decode("utf-8", errors="ignore")
