"""The end of a log: the chunks that hold its last lines, read newest first (``trainyard logs --tail N``).

A log is kept as chunks (a launcher report's bytes each); lines cross chunk edges. Read from the newest
back, chunks are taken until they hold ``n`` line breaks before the last line's end, and the oldest one
taken is cut after the break that starts the ``n``-th line from the end. Replicas' chunks interleave as
they arrived, so for a job of several replicas the count is of lines as they came, all replicas together
(``--replica`` counts one's).
"""

from __future__ import annotations

from collections.abc import Iterable

from trainyard.spec.records import LogChunk

TAIL_BYTES = 16 << 20  # characters read back at most: a log of long lines (or none) still answers at once


def last_lines(newest_first: Iterable[tuple[int, LogChunk]], n: int,
               max_bytes: int = TAIL_BYTES) -> tuple[list[LogChunk], int]:
    """The chunks holding the last ``n`` lines, oldest first (the oldest cut to start at a line), and the
    cursor of the newest (0 for none): what follows the log from where this ends. Fewer lines if the log
    has fewer, or if ``max_bytes`` of text were read first."""
    taken: list[LogChunk] = []
    cursor, size, breaks, cut = 0, 0, 0, None
    for id_, chunk in newest_first:
        if not taken:
            cursor = id_
        text = chunk.data
        if not taken and text.endswith("\n"):  # the last line's own break ends it; it starts no line
            text = text[:-1]
        i = len(text)
        while n and cut is None:
            i = text.rfind("\n", 0, i)
            if i < 0:
                break
            breaks += 1
            if breaks == n:
                cut = i + 1
        if n == 0:
            break
        taken.append(chunk if cut is None else chunk.model_copy(update={"data": chunk.data[cut:]}))
        size += len(chunk.data)
        if cut is not None or size >= max_bytes:
            break
    taken.reverse()
    return [c for c in taken if c.data], cursor
