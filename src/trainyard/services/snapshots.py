"""Code snapshots: tar.gz archives of a workdir, stored once under their sha256."""

from __future__ import annotations

import re
from typing import IO

from trainyard.artifacts.store import ArtifactStore
from trainyard.config import snapshot_limits
from trainyard.errors import BodyTooLarge, InvalidSpec
from trainyard.spec.records import DIGEST_PATTERN
from trainyard.spec.units import format_memory, parse_memory

BAD_DIGEST = "bad digest: expected sha256: and 64 lower-case hex digits"


def _invalid(message: str) -> InvalidSpec:
    return InvalidSpec(errors=[{"field": "workdir", "line": None, "where": "workdir", "message": message}])


def valid_digest(digest: str) -> bool:
    # the digest names a key in the artifact store: anything but lower-case hex could name another path there
    return re.fullmatch(DIGEST_PATTERN, digest) is not None


def max_bytes() -> int:
    """The largest code snapshot this server takes: ``$TRAINYARD_SNAPSHOT_MAX`` (512Mi unless set), the size over
    which the SDK and CLI already refuse to send one, so that a client that skips that check cannot fill the
    server's disk."""
    raw = snapshot_limits()[1]
    try:
        return parse_memory(raw)
    except ValueError as e:
        raise ValueError(f"$TRAINYARD_SNAPSHOT_MAX: {e}") from None


class SnapshotService:
    def __init__(self, artifacts: ArtifactStore) -> None:
        self.artifacts = artifacts
        self.max_bytes = max_bytes()

    def check_upload(self, digest: str, declared: str | None) -> None:
        """Before any of an upload's body is read: its digest well-formed, and its declared length (the
        ``Content-Length`` header, if any) within :attr:`max_bytes`."""
        if not valid_digest(digest):
            raise _invalid(BAD_DIGEST)
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            raise self.too_large()

    def too_large(self) -> BodyTooLarge:
        return BodyTooLarge(f"a code snapshot is larger than {format_memory(self.max_bytes)}, the most this server "
                            "takes ($TRAINYARD_SNAPSHOT_MAX where it runs): leave large files out with "
                            ".trainyardignore, or pass data as the job's inputs", limit=self.max_bytes)

    def has(self, digest: str) -> bool:
        """Whether the snapshot is stored; a malformed digest is refused (422) as an upload of it is."""
        if not valid_digest(digest):
            raise _invalid(BAD_DIGEST)
        return self.artifacts.has_snapshot(digest)

    def put(self, digest: str, body: IO[bytes]) -> str:
        """Store ``body`` (read as it is stored) under ``digest``, checked against it; returns its URL.
        Identical code is stored once."""
        if not valid_digest(digest):
            raise _invalid(BAD_DIGEST)
        try:
            return self.artifacts.put_snapshot(body, digest)
        except ValueError as e:
            raise _invalid(str(e)) from None
