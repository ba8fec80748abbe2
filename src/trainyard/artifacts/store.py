"""The artifact store: code snapshots, job outputs, pipeline values and full logs behind an fsspec URL.

Snapshots are content-addressed (``snapshots/sha256-<hex>.tar.gz``), so the
same code submitted twice is stored once. Outputs live under
``jobs/<job>/<attempt>/outputs/``, the full log of each replica at
``jobs/<job>/<attempt>/logs/replica-<n>.log``. The database keeps each file's
URL, size and digest; every read checks them (see :mod:`trainyard.artifacts.transfer`).

``storage`` holds per-protocol filesystem options (``{"s3": {"endpoint_url": ...}}``);
credentials are never among them: each process finds its own the standard way
(AWS variables, ``~/.aws``, an instance role).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import IO, Iterator

from trainyard.artifact_paths import check_artifact_path
from trainyard.artifacts import transfer
from trainyard.errors import ObjectCorrupt, ObjectMissing, StorageError
from trainyard.spec.records import DIGEST_PATTERN

_DIGEST = re.compile(DIGEST_PATTERN)


class ArtifactStore:
    def __init__(self, url: str, storage: dict[str, dict] | None = None) -> None:
        self.url = url.rstrip("/")
        self.storage = storage or {}
        try:
            self.fs, self.root = transfer.open_fs(self.url, self.storage)
        except ImportError as e:  # s3fs, gcsfs, adlfs: extras
            raise StorageError(f"artifact store {self.url}: {e} (for s3:// install 'trainyard[s3]')") from None
        self.root = self.root.rstrip("/")
        self.remote = transfer.atomic_puts(self.fs)  # an object store, not a folder
        if not self.remote:
            # a bucket is made by its owner: creating one here would hide a typo in the URL
            self.fs.makedirs(self.root, exist_ok=True)

    def _url(self, key: str) -> str:
        return f"{self.url}/{key}"

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def key_of(self, url: str) -> str:
        return url.removeprefix(self.url + "/")

    def probe(self) -> None:
        """Write, read back and delete a small object, so that wrong credentials, a missing bucket
        or an unreachable endpoint stop the server at start, with a plain message."""
        key = f".trainyard-probe-{uuid.uuid4().hex}"
        step = "write"
        try:
            with self.fs.open(self._path(key), "wb") as f:
                f.write(b"trainyard")
            step = "read"
            with self.fs.open(self._path(key), "rb") as f:
                if f.read() != b"trainyard":
                    raise OSError("read back other bytes than written")
            step = "delete"
            self.fs.rm_file(self._path(key))
        except Exception as e:  # botocore, aiohttp and OS errors alike: any of them means unusable
            raise StorageError(f"artifact store {self.url}: cannot {step} {key}: {_plain(e)}", url=self.url,
                               key=key) from None

    # -- snapshots ---------------------------------------------------------------------------

    def snapshot_key(self, digest: str) -> str:
        if not _DIGEST.match(digest):
            raise ValueError(f"not a snapshot digest: {digest!r}")
        return f"snapshots/{digest.replace(':', '-')}.tar.gz"

    def snapshot_url(self, digest: str) -> str:
        return self._url(self.snapshot_key(digest))

    def _exists(self, key: str) -> bool:
        """Whether ``key`` holds an object; a store that cannot say is a ``StorageError`` naming the key,
        not botocore's or aiohttp's own exception."""
        try:
            return self.fs.exists(self._path(key))
        except Exception as e:
            raise StorageError(f"artifact store {self.url}: cannot look up {key}: {_plain(e)}", url=self.url,
                               key=key) from None

    def has_snapshot(self, digest: str) -> bool:
        return self._exists(self.snapshot_key(digest))

    def remove_snapshot(self, digest: str) -> None:
        """The snapshot's tarball, if it is there (retention, once nothing names it)."""
        try:
            self.fs.rm_file(self._path(self.snapshot_key(digest)))
        except FileNotFoundError:
            pass

    def put_snapshot(self, stream: IO[bytes], digest: str) -> str:
        """Store a tarball whose sha256 must equal ``digest`` (``ValueError`` otherwise); its URL. One stored
        already is not written again, but ``stream`` is checked against the digest all the same: an upload is
        its uploader's proof of having the code (services.snapshots).

        Streamed through a temporary key: memory stays one block whatever the size."""
        key = self.snapshot_key(digest)
        if self._exists(key):
            h = hashlib.sha256()
            for block in transfer.chunks_of(stream):
                h.update(block)
            if f"sha256:{h.hexdigest()}" != digest:
                raise ValueError("snapshot content does not match its digest")
        else:
            try:
                transfer.write_stream(self.fs, self._path(key), transfer.chunks_of(stream), expect=digest)
            except transfer.Corrupt:
                raise ValueError("snapshot content does not match its digest") from None
            except Exception as e:  # OSError, and what botocore raises unwrapped (a refused connection)
                raise StorageError(f"artifact store: cannot write {key}: {_plain(e)}", key=key) from None
        return self._url(key)

    def put_bytes(self, key: str, data: bytes) -> str:
        """``data`` at ``key`` (once: an existing object is kept); its URL."""
        if not self._exists(key):
            try:
                transfer.write_stream(self.fs, self._path(key), [data])
            except Exception as e:  # OSError, and what botocore raises unwrapped
                raise StorageError(f"artifact store: cannot write {key}: {_plain(e)}", key=key) from None
        return self._url(key)

    # -- outputs and logs ----------------------------------------------------------------------

    def outputs_url(self, job_id: str, attempt: int, replica: int = 0) -> str:
        suffix = f"/replica-{replica}" if replica else ""
        return self._url(f"jobs/{job_id}/{attempt}/outputs{suffix}")

    def checkpoint_url(self, job_id: str) -> str:
        """Where the launchers of a job sync its checkpoint sets (see :mod:`trainyard.launch.checkpoints`)."""
        return self._url(f"jobs/{job_id}/checkpoints")

    def remove_checkpoints(self, job_id: str) -> None:
        """Every checkpoint set of the job (blobs and manifest), if it has any: a retention sweep's."""
        self._remove_tree(job_id, "/checkpoints", "the checkpoints")

    def remove_job(self, job_id: str) -> None:
        """Everything stored under the job (outputs, logs, checkpoints) once it is deleted. Its code snapshot
        is not the job's own: others may share it."""
        self._remove_tree(job_id, "", "the files")

    def _remove_tree(self, job_id: str, under: str, what: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", job_id):
            raise ValueError(f"not a job id: {job_id!r}")
        key = f"jobs/{job_id}{under}"
        try:
            if self.fs.exists(self._path(key)):
                self.fs.rm(self._path(key), recursive=True)
        except Exception as e:
            raise StorageError(f"artifact store {self.url}: cannot remove {what} of {job_id}: {_plain(e)}",
                               key=key) from None

    def log_url(self, job_id: str, attempt: int, replica: int = 0) -> str:
        """Where the launcher leaves the replica's full log when it ends."""
        return self._url(f"jobs/{job_id}/{attempt}/logs/replica-{replica}.log")

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
        return self.fs.open(self._path(self.key_of(self.confined(url))), "rb")

    def read(self, url: str, size: int | None = None, digest: str | None = None, start: int = 0,
             length: int | None = None) -> Iterator[bytes]:
        """The object's bytes as they are read, never the whole object in memory; from ``start``,
        ``length`` of them, for a resumed download (whose digest the client checks over the whole).

        A missing object or one of another size raises (``ObjectMissing``, ``ObjectCorrupt``,
        naming its key) before the first byte; a wrong digest is only known after the last,
        so it ends the stream with ``ObjectCorrupt`` and is logged with the key."""
        key = self.key_of(self.confined(url))
        try:
            body = transfer.read_checked(self.fs, self._path(key), size, digest, start=start, length=length)
        except FileNotFoundError:
            raise ObjectMissing(f"object {url} is missing", key=key) from None
        except transfer.Corrupt as e:
            raise ObjectCorrupt(f"object {url} is corrupt: {e}", key=key) from None
        except Exception as e:  # OSError, and what botocore raises unwrapped
            raise StorageError(f"cannot read object {url}: {_plain(e)}", key=key) from None
        return self._guarded(body, url, key)

    def _guarded(self, body: Iterator[bytes], url: str, key: str) -> Iterator[bytes]:
        try:
            yield from body
        except FileNotFoundError:
            raise ObjectMissing(f"object {url} vanished while read", key=key) from None
        except transfer.Corrupt as e:
            raise ObjectCorrupt(f"object {url} is corrupt: {e}", key=key) from None
        except Exception as e:  # the connection, mid-stream
            raise StorageError(f"cannot read object {url}: {_plain(e)}", key=key) from None


def _plain(e: BaseException) -> str:
    """An error's message without a traceback, with its type when the message alone says little."""
    text = str(e).strip() or e.__class__.__name__
    return text if len(text) > 20 else f"{e.__class__.__name__}: {text}"
