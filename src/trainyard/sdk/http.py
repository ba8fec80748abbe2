"""The SDK's one connection to a server: an httpx client, and the server's errors mapped back to typed ones.

A leaf that :mod:`trainyard.sdk.client` (jobs, queues) and :mod:`trainyard.sdk.pipelines`
both build on, so neither reaches into the other. An error body with a ``code`` becomes the
same :mod:`trainyard.errors` exception the server raised; a server that cannot be reached is
:class:`~trainyard.errors.ServerUnavailable`.
"""

from __future__ import annotations

import hashlib
import os
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, connect_sse

from trainyard import errors


def raise_for(resp: httpx.Response) -> None:
    """Raise the typed error a failed response carries; nothing for a success."""
    if resp.status_code < 400:
        return
    try:
        body = resp.json()
    except ValueError:
        body = {}
    if isinstance(body, dict) and "code" in body:
        raise errors.from_dict(body)
    raise errors.TrainyardError(f"HTTP {resp.status_code} from {resp.request.url}: {resp.text[:500]}")


def verify_for(url: str) -> ssl.SSLContext | bool:
    """httpx's ``verify`` for a client of ``url``: its default for https (the CA bundle, ``SSL_CERT_FILE``).

    For plain http, a context with no CA loaded: httpx would otherwise read and parse the whole bundle
    with every client (20 ms on an idle machine, 50–150 ms on a busy one, twice per CLI command against
    the local server), for a connection that never uses it. Should a TLS connection ever go through it,
    it verifies against nothing and fails: closed, never open.
    """
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT) if url.startswith("http://") else True


RESUMES = 3  # a download cut off this many times in one call gives up (its part is kept for the next)
# a file this large comes as PARTS ranges at once, as s3fs's get_file does: one stream's round trips
# through the server and the store leave the link idle on a busy machine
PARALLEL_OVER, PARTS = 64 << 20, 4


class Http:
    """Requests to one server, with its bearer token; ``transport`` talks to an app in-process (tests)."""

    def __init__(self, server: str, token: str | None, *, transport: httpx.BaseTransport | None = None,
                 timeout: float = 30.0) -> None:
        self.server = server
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(base_url=server, transport=transport, headers=headers, timeout=timeout,
                                    verify=verify_for(server))

    def close(self) -> None:
        self._client.close()

    def move(self, server: str) -> None:
        """Talk to ``server`` from now on (a restarted local server may listen on another port)."""
        self.server = server
        self._client.base_url = httpx.URL(server)

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            resp = self._client.request(method, path, **kw)
        except httpx.TransportError as e:
            raise errors.ServerUnavailable(f"cannot reach the trainyard server at {self.server}: {e}") from None
        raise_for(resp)
        return resp

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
        if self._client.head(f"/api/v1/snapshots/{digest}").status_code == 200:
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
                resumed = resumed or have > 0
        return f"sha256:{h.hexdigest()}", resumed, expected
