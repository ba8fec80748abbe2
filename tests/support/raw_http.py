"""Reading HTTP answers off a raw socket in tests that send bytes no client library would."""

from __future__ import annotations


def whole_answers(data: bytes) -> int:
    """How many whole answers ``data`` holds, after any ``100 Continue``: each framed by its content-length (none
    counts as an empty body once its head is in)."""
    n = 0
    while data.startswith(b"HTTP/1.1 100 ") and (end := data.find(b"\r\n\r\n")) >= 0:
        data = data[end + 4:]
    while (end := data.find(b"\r\n\r\n")) >= 0:
        lengths = [line.split(b":", 1)[1] for line in data[:end].split(b"\r\n")
                   if line.lower().startswith(b"content-length:")]
        size = int(lengths[0]) if lengths else 0
        if len(data) < end + 4 + size:
            break
        data, n = data[end + 4 + size:], n + 1
    return n
