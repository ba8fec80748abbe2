"""The artifact store: code snapshots and job outputs behind an fsspec URL.

Snapshots are content-addressed (``snapshots/sha256-<hex>.tar.gz``), so the
same code submitted twice is stored once. Outputs live under
``jobs/<job>/<attempt>/outputs/``.
"""

from __future__ import annotations

import hashlib
import io
import re
from typing import IO, Iterator

import fsspec

from trainyard.artifact_paths import check_artifact_path
from trainyard.spec.records import DIGEST_PATTERN

_DIGEST = re.compile(DIGEST_PATTERN)


class ArtifactStore:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.url)
        self.fs.makedirs(self.root, exist_ok=True)

    def _url(self, key: str) -> str:
        return f"{self.url}/{key}"

    def snapshot_key(self, digest: str) -> str:
        if not _DIGEST.match(digest):
            raise ValueError(f"not a snapshot digest: {digest!r}")
        return f"snapshots/{digest.replace(':', '-')}.tar.gz"

    def snapshot_url(self, digest: str) -> str:
        return self._url(self.snapshot_key(digest))

    def has_snapshot(self, digest: str) -> bool:
        return self.fs.exists(f"{self.root}/{self.snapshot_key(digest)}")

    def put_snapshot(self, stream: IO[bytes], digest: str) -> str:
        """Store a tarball whose sha256 must equal ``digest``; returns its URL."""
        path = f"{self.root}/{self.snapshot_key(digest)}"
        if self.fs.exists(path):
            return self.snapshot_url(digest)
        h, buf = hashlib.sha256(), io.BytesIO()
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            h.update(chunk)
            buf.write(chunk)
        if f"sha256:{h.hexdigest()}" != digest:
            raise ValueError("snapshot content does not match its digest")
        self.fs.makedirs(f"{self.root}/snapshots", exist_ok=True)
        tmp = f"{path}.{h.hexdigest()[:8]}.tmp"
        with self.fs.open(tmp, "wb") as f:
            f.write(buf.getvalue())
        self.fs.mv(tmp, path)
        return self.snapshot_url(digest)

    def outputs_url(self, job_id: str, attempt: int, replica: int = 0) -> str:
        suffix = f"/replica-{replica}" if replica else ""
        return self._url(f"jobs/{job_id}/{attempt}/outputs{suffix}")

    def confined(self, url: str) -> str:
        """``url`` itself when it names a file inside this store; ``ValueError`` otherwise.

        Output URLs are built from paths that launchers report; one recorded
        before paths were checked could still climb out (``../``) to any file."""
        rest = url.removeprefix(self.url + "/")
        if rest == url:
            raise ValueError(f"not in the artifact store: {url!r}")
        check_artifact_path(rest)
        return url

    def open(self, url: str) -> IO[bytes]:
        return fsspec.open(self.confined(url), "rb").open()

    def iter_bytes(self, url: str, chunk: int = 1 << 20) -> Iterator[bytes]:
        with self.open(url) as f:
            yield from iter(lambda: f.read(chunk), b"")
