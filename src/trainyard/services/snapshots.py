"""Code snapshots: tar.gz archives of a workdir, stored once under their sha256."""

from __future__ import annotations

from typing import IO

from trainyard.artifacts.store import ArtifactStore
from trainyard.errors import InvalidSpec


def _invalid(message: str) -> InvalidSpec:
    return InvalidSpec(errors=[{"field": "workdir", "line": None, "where": "workdir", "message": message}])


def valid_digest(digest: str) -> bool:
    return digest.startswith("sha256:") and len(digest) == 71


class SnapshotService:
    def __init__(self, artifacts: ArtifactStore) -> None:
        self.artifacts = artifacts

    def has(self, digest: str) -> bool:
        return valid_digest(digest) and self.artifacts.has_snapshot(digest)

    def put(self, digest: str, body: IO[bytes]) -> str:
        """Store ``body`` (read as it is stored) under ``digest``, checked against it; returns its URL.
        Identical code is stored once."""
        if not valid_digest(digest):
            raise _invalid("bad digest")
        try:
            return self.artifacts.put_snapshot(body, digest)
        except ValueError as e:
            raise _invalid(str(e)) from None
