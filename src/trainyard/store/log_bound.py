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

Read from the start, the log reads as lines: where the chunk that starts the kept end starts inside a line, it starts
with :data:`MARK`, and with a line break first where it follows the head's open last line (chunks kept from before
the bound stand before the note until the kept end moves past them); the note ends the head's line otherwise.
That lead (:func:`lead`) is stored as the chunk's first bytes, placed in bytes the cut dropped, so offsets still
place every byte of the log: a reader told of the cut (``event: cut``) drops the lead with them, and the kept end
holds at most a lead's few bytes more than half.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

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


class Cut(NamedTuple):
    lead: bytes  # what the report's bytes from ``tail`` start with, where they start the kept end
    gone: int | None  # the id of a chunk the cut emptied: deleted once the report's chunk is written


def cut_log(s, mine: tuple, first: bool, tail: int, keep: int,  # noqa: ANN001
            add: Callable[[int, bytes], None], note: bytes, new: tuple[int, bytes]) -> Cut:
    """Drop what lies between the head and ``tail`` of the chunks ``mine`` selects, cutting the chunks that cross
    either edge; with ``first`` (the log passes the bound now) the head's last chunk is cut and ``note`` written.
    ``add(offset, raw)`` writes a chunk; ``new`` is the report being stored, ``(its offset, its bytes)``.

    Chunks kept from before the log passed stay before the note (a reader that follows the log has them
    already: written again after it, they would reach it twice) until the kept end moves past them. The chunk
    the kept end starts with gets its :func:`lead` (see :class:`Cut` for what the caller does)."""
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
    # the chunk that holds byte tail - 1: whether the kept end starts a line is known from it
    t0 = s.execute(select(c.id, c.offset, c.data).where(*mine, c.offset >= half, c.offset < tail)
                   .order_by(c.offset.desc()).limit(1)).first()
    start, raw = new
    before = raw[tail - 1 - start] if start < tail <= start + len(raw) else None
    gone = None
    if t0 is not None:
        s.execute(delete(c).where(*mine, c.offset >= half, c.offset < t0.offset))
        data = t0.data.encode("utf-8")
        if len(data) >= tail - t0.offset:
            before = data[tail - 1 - t0.offset]
        rest = data[tail - t0.offset:]
        if rest:
            mark = lead(before, tail - half, opens_after(s, mine, t0.id, half))
            s.execute(update(c).where(c.id == t0.id).values(offset=tail - len(mark), data=text(mark + rest)))
            before = None
        else:  # deleted last: SQLite gives the id of the newest row, once deleted, to the next one written, which
            # a follower that read that row would never read
            gone = t0.id
    if before is not None:
        # a chunk kept from before that starts at ``tail``, else the report's bytes from there
        at = s.execute(select(c.id, c.data).where(*mine, c.offset == tail)).first()
        if at is not None:
            mark = lead(before, tail - half, opens_after(s, mine, at.id, half))
            s.execute(update(c).where(c.id == at.id).values(offset=tail - len(mark), data=mark.decode() + at.data))
            before = None
    if first:
        add(-1, note)  # offset -1: not bytes of the log
        if spill:
            add(tail, spill)
    # the report's bytes come after the note, which ends its line
    return Cut(b"" if before is None else lead(before, tail - half), gone)


MARK = "\u2026"  # starts the kept end's first line where the cut fell inside it: the line is not whole


def lead(before: int, room: int, brk: bool = False) -> bytes:
    """What the chunk that starts the kept end starts with, ``before`` being the byte the cut dropped just before
    it: :data:`MARK` if that ended no line, and first a line break with ``brk`` (:func:`opens_after`). Stored as
    the chunk's own bytes just before ``tail``, in bytes the cut dropped (``room`` of them past the head), so a
    reader that places lines by offset (the UI's live view, told of the cut) drops it with them."""
    out = (b"\n" if brk else b"") + (MARK.encode() if before != ord("\n") else b"")
    return out if len(out) <= room else out[:min(room, int(brk))]


def opens_after(s, mine: tuple, row: int, half: int) -> bool:  # noqa: ANN001
    """Whether the chunk read just before ``row`` (by cursor) once the cut is done ends inside a line: the head's
    last, with chunks kept from before the bound between it and the note (a note ends its own line). Chunks past
    the head before ``row`` are the cut's to drop."""
    c = t.LogChunk
    prev = s.execute(select(c.offset, c.data).where(*mine, c.id < row, c.offset < half)
                     .order_by(c.id.desc()).limit(1)).first()
    return prev is not None and prev.offset >= 0 and not prev.data.endswith("\n")


def text(raw: bytes) -> str:
    """``raw`` cut at a byte edge: a character split by the cut is dropped, not replaced (a replacement takes
    three bytes, which could pass the bound)."""
    return raw.decode("utf-8", errors="ignore")
