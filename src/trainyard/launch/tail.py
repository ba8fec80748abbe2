"""Reading what is new in output.log and metrics.jsonl, by byte offset.

The files are the buffer: the reporter only moves its offsets forward once the
server has acknowledged a chunk, so anything not acknowledged is read again.
"""

from __future__ import annotations

import os

CHUNK = 1 << 20  # bytes per report, so one request stays small


def utf8_cut(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a UTF-8 character.

    Only a trailing *incomplete* sequence is held back (at most 3 bytes);
    invalid bytes elsewhere are left for ``errors="replace"``.
    """
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b < 0x80:  # ASCII: nothing pending
            return n
        if b >= 0xF8:  # never valid in UTF-8
            return n
        if b >= 0xC0:  # a lead byte: how long should its sequence be?
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return n - back if back < need else n
    return n  # only continuation bytes: invalid anyway, let replace handle it


def read_from(path: str, offset: int, size: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(size)
    except FileNotFoundError:
        return b""


def file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def log_chunk(path: str, offset: int, final: bool, cap: int = CHUNK, masks=None) -> tuple[str, int]:  # noqa: ANN001
    """Text of ``path`` from ``offset`` and the number of bytes it stands for; ``masks``
    (:class:`trainyard.launch.secrets.Masks`) replaces the job's secret values by as many ``*``.

    A line still being written (after the last newline or carriage return) and a
    multi-byte character cut by the end of what was read are held back for the
    next chunk, unless the file is ``final`` (the writer is gone) and this is its
    very end, in which case all is sent, broken bytes as U+FFFD.
    """
    data = read_from(path, offset, cap)
    if not data:
        return "", 0
    at_end = len(data) < cap or file_size(path) <= offset + len(data)
    if final and at_end:
        cut = len(data)
    else:
        cut = utf8_cut(data)
        # a line still being written goes whole with its end in a later chunk: a reader that interleaves
        # several replicas' chunks (a gang's whole log) never glues two of their lines. \r ends a progress
        # bar's redraw; text with neither (a long line, a prompt) goes as it is, as before
        end = max(data.rfind(b"\n", 0, cut), data.rfind(b"\r", 0, cut))
        if end >= 0:
            cut = end + 1
        elif masks and (held := masks.held(data[:cut])) and (held < cut or len(data) < cap):
            cut -= held  # a long line cut in a secret's value (or a value being written): the rest comes later
    data = data[:cut]
    if masks:
        data = masks.apply(data)
    return data.decode("utf-8", errors="replace"), cut


def metric_lines(path: str, offset: int, cap: int = CHUNK) -> tuple[list[str], int]:
    """Complete lines of ``path`` from ``offset`` (no newline), and bytes consumed.

    A line still being written (no newline yet) is left for later. Blank lines
    are skipped but consumed. A line longer than ``cap`` is no metric line: it is passed over a chunk at a time,
    never held whole (a job could make this process, outside its memory limit, hold any size), and what is left
    of it arrives as a torn line, which the server skips.
    """
    data = read_from(path, offset, cap)
    end = data.rfind(b"\n")
    if end < 0:
        return [], len(data) if len(data) >= cap else 0
    lines = [ln.decode("utf-8", errors="replace") for ln in data[:end].split(b"\n")]
    return [ln for ln in lines if ln.strip()], end + 1
