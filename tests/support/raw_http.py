"""Reading HTTP answers off a raw socket in tests that send bytes no client library would."""

from __future__ import annotations

import socket


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


def read_answer(conn: socket.socket, got: bytes = b"", head_only: bool = False) -> tuple[int, bytes, bytes, bytes]:
    """The next final answer on ``conn`` (interim ones skipped), ``got`` being what was read of it already: its
    status, head and body (framed by its content-length; none to a HEAD), and the bytes read past it. Status 0
    when the server closed the connection before the answer was whole."""
    while True:
        while got.startswith(b"HTTP/1.1 1") and (end := got.find(b"\r\n\r\n")) >= 0:
            got = got[end + 4:]
        end = got.find(b"\r\n\r\n")
        if end >= 0 and not got.startswith(b"HTTP/1.1 1"):
            head = got[:end]
            lengths = [line.split(b":", 1)[1] for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")]
            size = 0 if head_only or not lengths else int(lengths[0])
            if len(got) >= end + 4 + size:
                return int(head.split(b" ", 2)[1]), head, got[end + 4:end + 4 + size], got[end + 4 + size:]
        chunk = conn.recv(65536)
        if not chunk:
            return 0, got, b"", b""
        got += chunk


def more_within(conn: socket.socket, seconds: float) -> bytes | None:
    """What ``conn`` reads within ``seconds`` (or until the server closes it): None if it closed with nothing read."""
    conn.settimeout(seconds)
    got = b""
    try:
        while chunk := conn.recv(65536):
            got += chunk
    except TimeoutError:
        return got
    return got or None
