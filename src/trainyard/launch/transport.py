"""One JSON POST over a plain socket: the reporter's whole HTTP needs.

Why not ``http.client``: importing it pulls in ``email`` and ``ssl`` (about
20 ms here), paid on every attempt and contending for the GIL while the
command is being started; the launcher's start-up time is on the path of
every job. This speaks just enough HTTP/1.1 (one request per connection,
``Content-Length`` or chunked or read-to-close replies). ``https://`` servers
go through ``http.client``, imported only then.

A connection can be opened ahead (:func:`connect`, while the command runs) and
handed to the next :func:`post_json`: the connect, and the server's accept of it,
are then off the path from the command's exit to its report. The server may have
let it go by then (a restart): sent again on a new connection, as a failed report is.
"""

from __future__ import annotations

from typing import Callable
from urllib.parse import urlsplit


class HTTPError(OSError):
    """The reply could not be read as HTTP."""


class _Unanswered(HTTPError):
    """The connection closed before a byte of the reply came."""


def connect(base_url: str, timeout: float):  # noqa: ANN201  (a socket.socket; socket is imported here)
    """A connection to an ``http://`` server opened ahead, for :func:`post_json`'s ``kept``; None for
    ``https://`` or when it cannot be opened (the post then connects itself, and says why)."""
    url = urlsplit(base_url)
    if url.scheme != "http" or not url.hostname:
        return None
    import socket

    try:
        return socket.create_connection((_host(url), url.port or 80), timeout=timeout)
    except OSError:
        return None


def _host(url) -> bytes:  # noqa: ANN001
    # bytes for the host: a str would make getaddrinfo import the idna codec
    return url.hostname.encode("idna") if not url.hostname.isascii() else url.hostname.encode()


def post_json(base_url: str, path: str, payload: bytes, headers: dict[str, str], timeout: float,
              ca_file: str | None = None, ca_pem: str | None = None,
              sent: Callable[[], None] | None = None, kept=None) -> tuple[int, bytes]:  # noqa: ANN001
    """POST ``payload`` to ``base_url`` + ``path``; the status code and the body. ``ca_file``: a PEM
    certificate trusted besides the system's (the server's own, when it serves HTTPS itself);
    ``ca_pem``: the same given as its text. ``sent``: called once the request is out, before the
    answer is read, to work while the server does (not called if the request could not be sent);
    ``kept``: a connection from :func:`connect` to send it on (closed here, whatever happens)."""
    url = urlsplit(base_url)
    target = url.path.rstrip("/") + path
    if url.scheme == "https":
        if kept is not None:
            kept.close()
        return _post_tls(url, target, payload, headers, timeout, ca_file, ca_pem, sent)
    if url.scheme != "http" or not url.hostname:
        if kept is not None:
            kept.close()
        raise HTTPError(f"not an http URL: {base_url!r}")
    lines = [f"POST {target} HTTP/1.1", f"Host: {url.netloc}", f"Content-Length: {len(payload)}",
             "Connection: close", *(f"{k}: {v}" for k, v in headers.items())]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload
    if kept is not None:
        try:
            with kept:
                kept.settimeout(timeout)
                kept.sendall(request)
                if sent is not None:
                    sent, work = None, sent
                    work()
                return _read_response(kept)
        except (_Unanswered, BrokenPipeError, ConnectionResetError):
            pass  # the server let it go unread: sent again on a new connection
    import socket  # here, on the reporter's thread, not on the launcher's path to the command

    with socket.create_connection((_host(url), url.port or 80), timeout=timeout) as sock:
        sock.sendall(request)
        if sent is not None:
            sent()
        return _read_response(sock)


def _read_response(sock) -> tuple[int, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            raise (HTTPError if buf else _Unanswered)("connection closed before the reply's headers")
        buf += data
    head, _, body = buf.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(status_line.split(" ", 2)[1])
    except (IndexError, ValueError):
        raise HTTPError(f"bad status line: {status_line!r}") from None
    fields = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    if status in (204, 304) or 100 <= status < 200:
        return status, b""
    length = fields.get("content-length")
    if length is not None and "chunked" not in fields.get("transfer-encoding", ""):
        want = int(length)
        while len(body) < want:
            data = sock.recv(65536)
            if not data:
                raise HTTPError("connection closed mid-body")
            body += data
        return status, body[:want]
    while data := sock.recv(65536):  # chunked or no length: the server closes when done
        body += data
    if "chunked" in fields.get("transfer-encoding", ""):
        body = _dechunk(body)
    return status, body


def _dechunk(data: bytes) -> bytes:
    out, pos = b"", 0
    while True:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            raise HTTPError("truncated chunked body")
        size = int(data[pos:eol].split(b";")[0], 16)
        if size == 0:
            return out
        out += data[eol + 2: eol + 2 + size]
        pos = eol + 2 + size + 2


def _post_tls(url, target: str, payload: bytes, headers: dict[str, str], timeout: float,
              ca_file: str | None, ca_pem: str | None, sent: Callable[[], None] | None) -> tuple[int, bytes]:
    import http.client
    import ssl

    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(ca_file)
    if ca_pem:
        context.load_verify_locations(cadata=ca_pem)
    conn = http.client.HTTPSConnection(url.hostname, url.port, timeout=timeout, context=context)
    try:
        conn.request("POST", target, body=payload, headers=headers)
        if sent is not None:
            sent()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()
