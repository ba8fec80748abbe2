"""A server that could not be reached, said as what it is: ``http://`` to a server that speaks HTTPS (it closes
the connection without a word) or ``https://`` to one that speaks plain HTTP (an SSL error) names the URL to use.

Asked only once a request has failed: a short look at the same address, speaking the other scheme."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit, urlunsplit

from trainyard import errors

PROBE_TIMEOUT = 2.0  # seconds: the address just answered (or refused) the request


def unreachable(server: str, error: BaseException) -> errors.ServerUnavailable:
    """The error for a request to ``server`` that failed with ``error``: the scheme to use where the server at
    that address speaks the other one, else ``cannot reach …`` with ``error``."""
    other = other_scheme(server, error)
    if other is None:
        return errors.ServerUnavailable(f"cannot reach the trainyard server at {server}: {error}")
    if other.startswith("https://"):
        return errors.ServerUnavailable(f"the server at {server} did not answer HTTP: it speaks HTTPS; use {other}")
    return errors.ServerUnavailable(f"the server at {server} did not answer HTTPS (its TLS handshake failed): it "
                                    f"speaks plain HTTP; use {other}")


def other_scheme(server: str, error: BaseException) -> str | None:
    """``server`` with the other scheme, where its failure ``error`` is what a wrong scheme gives and the address
    speaks the other one; None otherwise (a refused connection, a timeout, an answer in neither)."""
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.hostname or _never_connected(error):
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if parts.scheme == "http":
        if _speaks_tls(parts.hostname, port):
            return urlunsplit(parts._replace(scheme="https"))
        return None
    if _tls_error(error) and _speaks_http(parts.hostname, port, parts.netloc):
        return urlunsplit(parts._replace(scheme="http"))
    return None


def _never_connected(error: BaseException) -> bool:
    """Refused, unresolved or timed out: nothing answered there, in either scheme."""
    seen: BaseException | None = error
    for _ in range(8):  # bounded: a chain of causes could loop
        if seen is None:
            return False
        if isinstance(seen, (ConnectionRefusedError, socket.gaierror, TimeoutError)) or \
                type(seen).__name__ in ("ConnectTimeout", "ReadTimeout", "PoolTimeout", "TimeoutException"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _tls_error(error: BaseException) -> bool:
    """Whether a TLS error (not a certificate's: that one the server spoke TLS for) lies behind ``error``."""
    import ssl

    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError) and not isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _speaks_tls(host: str, port: int) -> bool:
    """Whether a TLS handshake at ``host:port`` completes (the certificate unchecked: only the scheme is asked)."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT) as sock, \
                context.wrap_socket(sock, server_hostname=host):
            return True
    except (OSError, ValueError):
        return False


def _speaks_http(host: str, port: int, netloc: str) -> bool:
    """Whether ``host:port`` answers a plain HTTP request with an HTTP status line."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT) as sock:
            sock.sendall(f"HEAD /healthz HTTP/1.1\r\nHost: {netloc}\r\nConnection: close\r\n\r\n".encode())
            return sock.recv(16).startswith(b"HTTP/1.")
    except (OSError, UnicodeError):
        return False
