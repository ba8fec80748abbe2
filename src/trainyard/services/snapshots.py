"""Code snapshots: tar.gz archives of a workdir, stored once under their sha256."""

from __future__ import annotations

import re
from typing import IO

from trainyard.artifacts.store import ArtifactStore
from trainyard.auth.permissions import Caller
from trainyard.config import snapshot_limits
from trainyard.errors import BodyTooLarge, InvalidSpec
from trainyard.spec.records import DIGEST_PATTERN
from trainyard.spec.units import format_memory, parse_memory
from trainyard.store.snapshot_owners import SnapshotOwners

BAD_DIGEST = "expected sha256: and 64 lower-case hex digits"


def _bad_digest() -> InvalidSpec:
    # the digest is the upload's path (…/snapshots/DIGEST), not a spec's workdir: the client computed it
    return InvalidSpec.parameter("digest", BAD_DIGEST, "path")


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
    """Snapshots are named by their content's digest, which a job's spec shows to whoever sees the job: the digest
    alone lets no one else read or run the code. A caller may use a snapshot it uploaded (its upload is checked
    against the digest even when the code is stored already: proof it has the code) or one a job it sees ran (a
    teammate's re-run); to anyone else it is as if it were not there, in HEAD as at submit."""

    def __init__(self, artifacts: ArtifactStore, owners: SnapshotOwners) -> None:
        self.artifacts = artifacts
        self.owners = owners
        self.max_bytes = max_bytes()

    def may_use(self, caller: Caller, digest: str) -> bool:
        if caller.admin or self.owners.owns(digest, caller.user):
            return True
        return self.owners.ran_for(digest, caller.user, list(caller.teams))  # as Caller.sees, in the query

    def check_use(self, caller: Caller, digest: str | None, field: str = "workdir") -> None:
        """InvalidSpec naming ``field``, worded as for a snapshot never uploaded, unless ``caller`` may use it."""
        if digest is not None and not self.may_use(caller, digest):
            raise InvalidSpec(errors=[{"field": field, "line": None, "where": field,
                                       "message": f"snapshot {digest} was not uploaded"}])

    def visible(self, caller: Caller, digest: str) -> bool:
        """HEAD's answer: stored, and the caller's to use (else its client uploads it, and so may use it)."""
        return self.has(digest) and self.may_use(caller, digest)

    def check_upload(self, digest: str, declared: str | None) -> None:
        """Before any of an upload's body is read: its digest well-formed, and its declared length (the
        ``Content-Length`` header, if any) within :attr:`max_bytes`."""
        if not valid_digest(digest):
            raise _bad_digest()
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            raise self.too_large()

    def too_large(self) -> BodyTooLarge:
        return BodyTooLarge(f"a code snapshot is larger than {format_memory(self.max_bytes)}, the most this server "
                            "takes ($TRAINYARD_SNAPSHOT_MAX where it runs): leave large files out with "
                            ".trainyardignore, or pass data as the job's inputs", limit=self.max_bytes)

    def has(self, digest: str) -> bool:
        """Whether the snapshot is stored; a malformed digest is refused (422) as an upload of it is."""
        if not valid_digest(digest):
            raise _bad_digest()
        return self.artifacts.has_snapshot(digest)

    def put(self, digest: str, body: IO[bytes], caller: Caller) -> str:
        """Store ``body`` (read as it is stored) under ``digest``, checked against it, as ``caller``'s; returns its
        URL. Identical code is stored once, and checked all the same."""
        if not valid_digest(digest):
            raise _bad_digest()
        try:  # checked against the digest whether stored already or not (ArtifactStore.put_snapshot)
            url = self.artifacts.put_snapshot(body, digest)
        except ValueError as e:
            raise InvalidSpec.body("", str(e)) from None  # the uploaded bytes are not what the digest names
        self.owners.add(digest, caller.user)
        return url
