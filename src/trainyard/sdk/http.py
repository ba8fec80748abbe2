"""The SDK's one connection to a server: an httpx client, and the server's errors mapped back to typed ones.

A leaf that :mod:`trainyard.sdk.client` (jobs, queues) and :mod:`trainyard.sdk.pipelines`
both build on, so neither reaches into the other. An error body with a ``code`` becomes the
same :mod:`trainyard.errors` exception the server raised; a server that cannot be reached is
:class:`~trainyard.errors.ServerUnavailable`.
"""

from __future__ import annotations

import hashlib
import json
import os
import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from httpx_sse import ServerSentEvent, connect_sse

from trainyard import errors
from trainyard.home import FOLLOW_WAIT
from trainyard.sdk.plain_http import PlainConnection, plain_http_for
from trainyard.sdk.scheme import unreachable
from trainyard.sdk.trust import context_for, untrusted, untrusted_message


def raise_for(resp: httpx.Response) -> None:
    """Raise the typed error a failed response carries; nothing for a success."""
    if resp.status_code >= 400:
        raise error_for(resp.status_code, resp.content, str(resp.request.url))


def error_for(status: int, content: bytes, url: str) -> errors.TrainyardError:
    """The typed error of a failed answer: the one its body's ``code`` names, else one naming the status."""
    try:
        body = json.loads(content)
    except ValueError:
        body = {}
    if isinstance(body, dict) and "code" in body:
        return errors.from_dict(body)
    return errors.TrainyardError(f"HTTP {status} from {url}: {content.decode(errors='replace')[:500]}")


def verify_for(url: str) -> ssl.SSLContext | bool:
    """httpx's ``verify`` for a client of ``url``: for https, the certificate the home's own server
    serves there (:func:`trainyard.sdk.trust.context_for`), else httpx's default (the CA bundle,
    ``SSL_CERT_FILE``).

    For plain http, a context with no CA loaded: httpx would otherwise read and parse the whole bundle
    with every client (20 ms on an idle machine, 50–150 ms on a busy one, twice per CLI command against
    the local server), for a connection that never uses it. Should a TLS connection ever go through it,
    it verifies against nothing and fails: closed, never open.
    """
    if url.startswith("http://"):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return context_for(url) or True


IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})  # RFC 9110: doing one twice is doing it once
MOVES = 3  # servers one request follows the leader to before it gives up


def may_resend(method: str, error: httpx.TransportError, content: object = None) -> bool:
    """Whether a request that failed with ``error`` may go again, to the servers' new leader.

    A connection never made (refused, timed out) sent nothing: any request may go again. One lost
    after it was made (reset, cut off before the answer) may have been done by the server that died:
    only an idempotent request goes again, so a POST is never submitted twice. A body that was a
    stream cannot be sent twice. A timeout waiting for an answer is a slow server, not a gone one."""
    if content is not None and not isinstance(content, (bytes, str)):
        return False
    if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
        return True
    return method.upper() in IDEMPOTENT and isinstance(
        error, (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError))


RESUMES = 3  # a download cut off this many times in one call gives up (its part is kept for the next)
# a file this large comes as PARTS ranges at once, as s3fs's get_file does: one stream's round trips
# through the server and the store leave the link idle on a busy machine
PARALLEL_OVER, PARTS = 64 << 20, 4


class Http:
    """Requests to one server, with its bearer token; ``transport`` talks to an app in-process (tests).

    ``follow(dead_url, wait)``, where given (a client in a job: :func:`trainyard.home.moved_leader`), names the
    servers' new leader and its token when the server stops answering; a request that :func:`may_resend`
    allows then goes there."""

    def __init__(self, server: str, token: str | None, *, transport: httpx.BaseTransport | None = None,
                 timeout: float = 30.0,
                 follow: Callable[[str, float], tuple[str, str | None] | None] | None = None) -> None:
        self.server = server
        self.token = token
        self.follow = follow
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(base_url=server, transport=transport, headers=headers, timeout=timeout,
                                    verify=verify_for(server))
        self._timeout = timeout
        self._transport = transport
        self._plain = self._plain_for(server)

    def _plain_for(self, server: str) -> PlainConnection | None:
        return PlainConnection(server, self._timeout) if self._transport is None and plain_http_for(server) else None

    def close(self) -> None:
        self._client.close()
        if self._plain is not None:
            self._plain.close()

    def move(self, server: str) -> None:
        """Talk to ``server`` from now on (a restarted local server may listen on another port)."""
        self.server = server
        self._client.base_url = httpx.URL(server)
        if self._plain is not None:
            self._plain.close()
        self._plain = self._plain_for(server)

    def relocate(self, wait: float = FOLLOW_WAIT) -> bool:
        """Talk to the servers' new leader, if ``follow`` names one other than this server within ``wait``
        seconds; whether it did."""
        found = self.follow(self.server, wait) if self.follow else None
        if found is None:
            return False
        server, token = found
        if server.startswith("https://") != self.server.startswith("https://"):
            return False  # the client's TLS settings were made for the other scheme
        self.move(server)
        self.token = token
        if token:
            self._client.headers["Authorization"] = f"Bearer {token}"
        else:
            self._client.headers.pop("Authorization", None)
        return True

    def send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """The server's answer, whatever its status; following the leader (``follow``) where the server
        is gone and the request may go again; :class:`~trainyard.errors.ServerUnavailable` if none answers."""
        moves = 0
        while True:
            try:
                return self._client.request(method, path, **kw)
            except httpx.TransportError as e:
                failed = untrusted(e)
                if failed is not None:  # another server will not fix this certificate: say what will
                    raise errors.ServerUnavailable(untrusted_message(self.server, failed)) from None
                if moves == MOVES or not may_resend(method, e, kw.get("content")) or not self.relocate():
                    raise unreachable(self.server, e) from None
                moves += 1

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        resp = self.send(method, path, **kw)
        raise_for(resp)
        return resp

    def json_call(self, method: str, path: str, *, body: Any = None, query: dict[str, Any] | None = None,
                  timeout: float | None = None) -> bytes:
        """The body of a successful answer to a JSON request, its error raised typed: over the kept
        plain connection where it can go (:mod:`trainyard.sdk.plain_http`), else as :meth:`request`."""
        if self._plain is not None:
            # as httpx encodes a json= body
            content = None if body is None else \
                json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            if content is not None:
                headers["Content-Type"] = "application/json"
            target = path + (f"?{urlencode(query)}" if query else "")
            answer = self._plain.call(method, target, content, headers, idempotent=method.upper() in IDEMPOTENT,
                                      timeout=timeout)
            if answer is not None:
                status, data = answer
                if status >= 400:
                    raise error_for(status, data, self.server + target)
                return data
        return self.request(method, path, json=body, params=query,
                            **({} if timeout is None else {"timeout": timeout})).content

    @contextmanager
    def stream(self, method: str, path: str, **kw: Any) -> Iterator[httpx.Response]:
        """A streamed response, its error raised typed; transport errors pass through, for the caller to retry."""
        with self._client.stream(method, path, **kw) as resp:
            if resp.status_code >= 400:
                resp.read()
                raise_for(resp)
            yield resp

    @contextmanager
    def events(self, path: str, **kw: Any) -> Iterator[Iterator[ServerSentEvent]]:
        """A server-sent event stream (GET), its error raised typed; transport errors pass through."""
        with connect_sse(self._client, "GET", path, **kw) as source:
            if source.response.status_code >= 400:
                source.response.read()
                raise_for(source.response)
            # httpx-sse dispatches an empty event at the blank line after a keep-alive comment once an
            # id has been seen; the SSE spec (and a browser) dispatches nothing when the data is empty
            yield (e for e in source.iter_sse() if e.data)

    def upload_snapshot(self, blob: bytes | None, digest: str) -> None:
        """Upload a code snapshot unless the server has it already (snapshots are keyed by content)."""
        if self.send("HEAD", f"/api/v1/snapshots/{digest}").status_code == 200:
            return
        self.request("PUT", f"/api/v1/snapshots/{digest}", content=blob, headers={"Content-Type": "application/gzip"})

    def download(self, path: str, target: Path, size: int | None = None, digest: str | None = None) -> None:
        """Stream the file at ``path`` into ``target``, checked against the server's ``X-Digest``.

        Written to ``.<name>.part`` beside ``target`` and renamed when whole and intact. A stream cut
        off keeps the part: the download goes on from its end with a ``Range`` request (here, up
        to :data:`RESUMES` times, and in a later call); the digest is checked over the whole file.
        A wrong digest after a resumed start is tried once more from the first byte (the part may
        have been another file's); a wrong one then means the stored object is corrupt."""
        part = target.with_name(f".{target.name}.part")
        if size is not None and size >= PARALLEL_OVER and not part.exists() \
                and self._fetch_parallel(path, target, size, digest):
            return
        for fresh in (False, True):
            if fresh:
                part.unlink(missing_ok=True)
            got, resumed, expected = self._fetch(path, part, size, digest)
            if expected is None or got == expected:
                os.replace(part, target)
                return
            part.unlink(missing_ok=True)
            if fresh or not resumed:
                break
        raise errors.ObjectCorrupt(f"{path}: received {got}, recorded {expected}: the stored object is corrupt")

    def _fetch_parallel(self, path: str, target: Path, size: int, digest: str | None) -> bool:
        """``target`` fetched as :data:`PARTS` ranges at once into ``.<name>.ranges``, then checked
        against the digest over the whole file; False (and nothing left) when any range fails or
        the digest differs, for the one-stream download, which resumes and names the fault."""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        ranges = target.with_name(f".{target.name}.ranges")
        step = -(-size // PARTS)
        said: list[str] = []
        lock = threading.Lock()

        def one(first: int) -> None:
            last = min(first + step, size) - 1
            with self.stream("GET", path, headers={"Range": f"bytes={first}-{last}"}) as resp:
                if resp.status_code != 206 or resp.headers.get("Content-Range", "").split("/")[0] != \
                        f"bytes {first}-{last}":
                    raise ValueError(f"not the range asked for: {resp.status_code}")
                if resp.headers.get("X-Digest"):
                    with lock:
                        said.append(resp.headers["X-Digest"])
                at = first
                with open(ranges, "r+b") as f:
                    for chunk in resp.iter_bytes():
                        os.pwrite(f.fileno(), chunk, at)
                        at += len(chunk)
                if at != last + 1:
                    raise ValueError("a range ended early")

        try:
            with open(ranges, "wb") as f:
                f.truncate(size)
            with ThreadPoolExecutor(PARTS, thread_name_prefix="download") as pool:
                for done in [pool.submit(one, first) for first in range(0, size, step)]:
                    done.result()
            h = hashlib.sha256()
            with open(ranges, "rb") as f:
                while block := f.read(1 << 20):
                    h.update(block)
            expected = digest or (said[0] if said else None)
            if expected is not None and f"sha256:{h.hexdigest()}" != expected:
                return False
            os.replace(ranges, target)
            return True
        except (httpx.TransportError, errors.TrainyardError, ValueError, OSError):
            return False
        finally:
            ranges.unlink(missing_ok=True)

    def _fetch(self, path: str, part: Path, size: int | None, digest: str | None) -> tuple[str, bool, str | None]:
        """Complete ``part`` from the server; its digest, whether bytes from before were kept, and
        the digest expected."""
        h, have = hashlib.sha256(), 0
        if part.exists():
            have = part.stat().st_size
            if size is not None and have > size:
                part.unlink()
                have = 0
            else:
                with open(part, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
        resumed = have > 0
        expected = digest
        for tries in range(RESUMES + 1):
            if size is not None and have == size and resumed:
                break  # all there from an earlier call: only the digest is left to check
            headers = {"Range": f"bytes={have}-"} if have else {}
            try:
                with self.stream("GET", path, headers=headers) as resp:
                    expected = resp.headers.get("X-Digest") or expected
                    if resp.status_code != 206:  # the whole file: whatever the part held goes
                        h, have, resumed = hashlib.sha256(), 0, False
                    with open(part, "ab" if have else "wb") as f:
                        for chunk in resp.iter_bytes():
                            h.update(chunk)
                            f.write(chunk)
                            have += len(chunk)
                break
            except httpx.TransportError as e:
                if tries == RESUMES:
                    raise errors.ObjectCorrupt(
                        f"{path}: the download broke off ({e}); {have} bytes are kept in {part} and a new download "
                        "goes on from there; the server's log names the object in the artifact store") from None
                if isinstance(e, httpx.ConnectError):  # the server is gone: in a job, the rest from the new leader
                    self.relocate()
                resumed = resumed or have > 0
        return f"sha256:{h.hexdigest()}", resumed, expected
