"""Serving part of a stored file: an HTTP ``Range`` header read, and a body whose late failure is logged."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from trainyard.errors import RangeNotSatisfiable, StorageError

logger = logging.getLogger("trainyard.jobs")  # the name the job service logs under


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``(first, last)`` byte of the single range ``header`` asks for (RFC 9110), or None to send the
    whole file: no header, or one not served here (several ranges, another unit), which a server
    may ignore. A range that starts past the end raises ``RangeNotSatisfiable``."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first_s, sep, last_s = header[len("bytes="):].strip().partition("-")
    if not sep or not (first_s.isdigit() or last_s.isdigit()) or (first_s and not first_s.isdigit()) \
            or (last_s and not last_s.isdigit()):
        return None
    if not first_s:  # a suffix: the last N bytes
        n = int(last_s)
        if n == 0:
            raise RangeNotSatisfiable(f"range {header!r} asks for no bytes", size=size)
        return max(0, size - n), size - 1
    first = int(first_s)
    last = min(int(last_s), size - 1) if last_s else size - 1
    if first >= size or last < first:
        raise RangeNotSatisfiable(f"range {header!r} is outside the file's {size} bytes", size=size)
    return first, last


def ended_quietly(body: Iterator[bytes]) -> Iterator[bytes]:
    """``body``, whose late failure (a wrong digest is known after the last byte) is logged with the
    object's key, not raised: the response has started, and the client checks ``X-Digest`` itself."""
    try:
        yield from body
    except StorageError as e:
        logger.error("%s", e.message)
