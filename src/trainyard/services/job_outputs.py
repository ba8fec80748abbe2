"""A job's outputs as the API serves them: which attempt's, their records, and their bytes (whole or a range)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainyard.artifact_paths import check_artifact_path
from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.errors import InvalidSpec, NotFound, RangeNotSatisfiable, StorageError
from trainyard.spec.records import ArtifactInfo, AttemptOutputs

if TYPE_CHECKING:
    from trainyard.artifacts.store import ArtifactStore
    from trainyard.spec.records import JobInfo
    from trainyard.store import Store

logger = logging.getLogger("trainyard.jobs")


class OutputsMixin:
    """A job's outputs are those of one attempt: its final one unless asked for another by number (see
    :meth:`trainyard.store.telemetry.TelemetryMixin.outputs_of`)."""

    store: Store
    artifacts: ArtifactStore

    def get(self, job_id: str, caller: Caller = LOCAL_ADMIN) -> JobInfo:  # JobService's
        raise NotImplementedError

    def outputs(self, job_id: str, caller: Caller = LOCAL_ADMIN, attempt: int | None = None) -> AttemptOutputs:
        self._check(job_id, caller, attempt)
        shown, files = self.store.outputs_of(job_id, attempt)
        return AttemptOutputs(shown, [info for info, _ in files])

    def _check(self, job_id: str, caller: Caller, attempt: int | None) -> None:
        """JobNotFound for an unknown job, or one the caller may not see; NotFound for an attempt it has not had
        (an empty list would read as an attempt that wrote nothing)."""
        info = self.get(job_id, caller)
        if attempt is not None and all(a.number != attempt for a in info.attempts):
            raise NotFound(f"job {job_id} has no attempt {attempt} (it has had {len(info.attempts)})",
                           job_id=job_id, attempt=attempt)

    def output(self, job_id: str, path: str, caller: Caller = LOCAL_ADMIN,
               attempt: int | None = None) -> tuple[ArtifactInfo, str]:
        """One output file's record and its URL, which is checked to lie inside the artifact store."""
        try:
            check_artifact_path(path)
        except ValueError as e:
            raise InvalidSpec.parameter("path", str(e), "path") from None  # the URL's, after …/outputs/
        self._check(job_id, caller, attempt)
        shown, files = self.store.outputs_of(job_id, attempt)
        for info, url in files:
            if info.path == path:
                try:
                    return info, self.artifacts.confined(url)
                except ValueError:
                    break  # recorded before paths were checked: never served
        which = "no attempt has ended" if shown is None else f"attempt {shown}"
        raise NotFound(f"job {job_id} has no output {path!r} ({which})", job_id=job_id, path=path, attempt=shown)

    def open_output(self, job_id: str, path: str, caller: Caller = LOCAL_ADMIN, byte_range: str | None = None,
                    attempt: int | None = None) -> tuple[ArtifactInfo, tuple[int, int] | None, Iterator[bytes]]:
        """One output file's record, the ``(first, last)`` bytes sent when ``byte_range`` (an HTTP
        ``Range`` header) asks for a part (None: the whole file), and those bytes, read as they are
        sent and checked against the record (a missing object or one of the wrong size raises here,
        naming its key; ``RangeNotSatisfiable`` for a range past the end)."""
        info, url = self.output(job_id, path, caller, attempt)
        part = parse_range(byte_range, info.size)
        if part is None:
            return info, None, _ended_quietly(self.artifacts.read(url, info.size, info.digest))
        first, last = part
        body = self.artifacts.read(url, info.size, info.digest, start=first, length=last - first + 1)
        return info, part, _ended_quietly(body)


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``(first, last)`` byte of the single range ``header`` asks for (RFC 9110), or None to send the
    whole file: no header, or one not served here (several ranges, another unit), which a server
    may ignore. A range that starts past the end raises ``RangeNotSatisfiable``."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first_s, sep, last_s = header[len("bytes="):].strip().partition("-")
    if not sep or not (first_s.isdigit() or last_s.isdigit()) or (first_s and not first_s.isdigit()) \
            or (last_s and not last_s.isdigit()):
        return None
    if not first_s:  # a suffix: the last N bytes
        n = int(last_s)
        if n == 0:
            raise RangeNotSatisfiable(f"range {header!r} asks for no bytes", size=size)
        return max(0, size - n), size - 1
    first = int(first_s)
    last = min(int(last_s), size - 1) if last_s else size - 1
    if first >= size or last < first:
        raise RangeNotSatisfiable(f"range {header!r} is outside the file's {size} bytes", size=size)
    return first, last


def _ended_quietly(body: Iterator[bytes]) -> Iterator[bytes]:
    """``body``, whose late failure (a wrong digest is known after the last byte) is logged with the
    object's key, not raised: the response has started, and the client checks ``X-Digest`` itself."""
    try:
        yield from body
    except StorageError as e:
        logger.error("%s", e.message)
