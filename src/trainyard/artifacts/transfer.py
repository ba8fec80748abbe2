"""Moving bytes in and out of an fsspec store so that only complete, checked objects ever appear.

Shared by the server's artifact store and the launcher (which uploads outputs
and logs from the node), so it imports nothing of trainyard but fsspec and
:mod:`trainyard.artifacts.reading` (one streamed request per range read).

- Object stores (S3 and the S3-compatible, GCS, Azure) publish an object only
  when its single PUT or its multipart upload completes, and s3fs aborts the
  multipart upload on an error: a file whose digest is known before it is sent
  goes straight to its key. Elsewhere (a local or network folder) it is written
  beside its key and renamed, so a reader never sees half a file.
- A stream whose digest is only known at its end (an uploaded snapshot) is
  always written to a temporary key, checked, then moved into place.
- After an upload the stored size is compared with the bytes sent; the sha256 is
  recorded with the file and checked again by every download.
- Transient errors are retried by the filesystem itself (s3fs: botocore's
  retries with backoff, on top of its own retries of throttling and 5xx).
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import IO, Iterable, Iterator

from trainyard.artifacts import reading

BLOCK = 1 << 20
# s3fs buffers a written file up to its block size before it sends it as a part (50 MiB by default),
# and copies that buffer three times on the way out: a server streaming an upload to the store held
# +32 MiB per upload with 8 MiB parts. S3's smallest part (5 MiB) caps it lower; 10,000 parts of it
# still carry 48 GiB, far past any code snapshot (the one large thing written this way)
WRITE_BLOCK = 5 << 20
# protocols whose writes become visible whole, at the end, or not at all
ATOMIC_PROTOCOLS = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl"}


class Corrupt(ValueError):
    """The bytes are not those recorded: wrong size or wrong digest."""


def open_fs(url: str, storage: dict[str, dict] | None = None):  # noqa: ANN201
    """``(filesystem, path)`` for ``url``, with the options ``storage`` holds for its protocol
    (``{"s3": {"endpoint_url": ...}}``, the shape of ``fsspec.config.conf``).

    A ``file://`` URL is decoded as the launcher decodes it (``launch.files.local_path``): fsspec takes its path
    literally, so the default store of a home with a space or a non-ASCII letter (``Path.as_uri()``, ``home%20x``)
    would be a folder of another name for the server than for the launchers."""
    import fsspec

    protocol = url.split("://", 1)[0] if "://" in url else "file"
    options = dict((storage or {}).get(protocol, {}))
    if "://" in url and protocol in ("file", "local"):
        from urllib.parse import unquote, urlsplit

        return fsspec.filesystem("file", **options), unquote(urlsplit(url).path)  # a path: never a chain (a::b)
    return fsspec.core.url_to_fs(url, **options)


def use_storage(storage: dict[str, dict] | None) -> None:
    """Make ``storage`` the default options of every filesystem this process opens by URL
    (the launcher: snapshots, inputs and outputs all follow the server's endpoint)."""
    if not storage:
        return
    import fsspec.config

    for protocol, options in storage.items():
        fsspec.config.conf.setdefault(protocol, {}).update(options)


def atomic_puts(fs) -> bool:  # noqa: ANN001
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return bool(ATOMIC_PROTOCOLS.intersection(protocols))


def file_digest(path: Path) -> str:
    with open(path, "rb") as f:
        return stream_digest(f)


def stream_digest(f) -> str:  # noqa: ANN001
    """``sha256:<hex>`` of what is left to read in the open binary file ``f``."""
    h = hashlib.sha256()
    while block := f.read(BLOCK):
        h.update(block)
    return f"sha256:{h.hexdigest()}"


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0]


def _folder_for(fs, path: str) -> None:  # noqa: ANN001
    """The folder ``path`` goes in, where there are folders: an object store has none, and s3fs
    would create a missing bucket, hiding a typo or a deleted bucket."""
    if not atomic_puts(fs):
        fs.makedirs(_parent(path), exist_ok=True)


def _temporary(path: str) -> str:
    return f"{_parent(path)}/.{path.rsplit('/', 1)[-1]}.{uuid.uuid4().hex[:12]}.part"


def _drop(fs, path: str) -> None:  # noqa: ANN001
    try:
        fs.rm_file(path)
    except (FileNotFoundError, OSError):
        pass


def _check_size(fs, path: str, size: int) -> None:  # noqa: ANN001
    stored = fs.size(path)
    if stored != size:
        raise Corrupt(f"{path}: stored {stored} bytes of {size}")


def put_file(fs, src: Path, path: str) -> tuple[int, str]:  # noqa: ANN001
    """Upload the local file ``src`` to ``path``; its size and ``sha256:`` digest.

    Large files go up in parts (s3fs switches to a multipart upload by itself). The digest is
    computed while the file goes up, not before: hashlib drops the GIL, and the second read of
    the file comes from the page cache."""
    from concurrent.futures import ThreadPoolExecutor

    size = src.stat().st_size
    _folder_for(fs, path)
    target = path if atomic_puts(fs) else _temporary(path)
    with ThreadPoolExecutor(1, thread_name_prefix="digest") as pool:
        hashing = pool.submit(file_digest, src)
        try:
            fs.put_file(str(src), target)
            _check_size(fs, target, size)
            digest = hashing.result()
            if target != path:
                fs.mv(target, path)
        except BaseException:
            _drop(fs, target)
            raise
    return size, digest


def put_named(fs, src: Path, path: str, digest: str) -> int:  # noqa: ANN001
    """Upload the local file ``src`` to ``path`` (a content-addressed key) only as the bytes whose sha256 is ``digest``;
    their size. The digest is taken of the very bytes sent, not of a second read as :func:`put_file` takes it: a file
    changed in place since it was hashed is ``Corrupt``, and nothing is left at ``path`` (on an object store it was
    there for the moment between the upload's end and its removal; elsewhere it never was)."""
    size = src.stat().st_size
    _folder_for(fs, path)
    target = path if atomic_puts(fs) else _temporary(path)
    h, sent = hashlib.sha256(), 0
    try:
        # parts of at least 5 MiB, and few enough for S3's 10,000 for whatever the file's size
        with open(src, "rb") as f, fs.open(target, "wb", block_size=max(WRITE_BLOCK, size // 9000 + 1)) as out:
            while block := f.read(BLOCK):
                h.update(block)
                out.write(block)
                sent += len(block)
        if f"sha256:{h.hexdigest()}" != digest:
            raise Corrupt(f"changed while it was uploaded: sent sha256:{h.hexdigest()}, named {digest}")
        _check_size(fs, target, sent)
        if target != path:
            fs.mv(target, path)
    except BaseException:
        _drop(fs, target)
        raise
    return sent


def write_stream(fs, path: str, chunks: Iterable[bytes], expect: str | None = None) -> tuple[int, str]:  # noqa: ANN001
    """Write ``chunks`` to ``path`` through a temporary key; moved into place only when the
    size stored matches and the sha256 equals ``expect`` (when given), else ``Corrupt``."""
    h, size = hashlib.sha256(), 0
    _folder_for(fs, path)
    tmp = _temporary(path)
    try:
        with fs.open(tmp, "wb", block_size=WRITE_BLOCK) as f:
            for chunk in chunks:
                h.update(chunk)
                f.write(chunk)
                size += len(chunk)
        digest = f"sha256:{h.hexdigest()}"
        if expect is not None and digest != expect:
            raise Corrupt(f"content does not match its digest ({digest}, expected {expect})")
        _check_size(fs, tmp, size)
        fs.mv(tmp, path)
    except BaseException:
        _drop(fs, tmp)
        raise
    return size, digest


def chunks_of(stream: IO[bytes], block: int = BLOCK) -> Iterator[bytes]:
    yield from iter(lambda: stream.read(block), b"")


def read_checked(fs, path: str, size: int | None, digest: str | None, start: int = 0,  # noqa: ANN001
                 length: int | None = None) -> Iterator[bytes]:
    """The bytes at ``path`` as they are read, one request streamed in chunks (see :mod:`.reading`); ``FileNotFoundError`` before
    the first one when it is missing, ``Corrupt`` before the first (wrong size) or after the last
    (wrong digest).

    ``start`` and ``length`` read a part only (a resumed download); its digest is then the reader's
    to check, over the whole file."""
    stored = fs.size(path)  # raises FileNotFoundError
    if size is not None and stored != size:
        raise Corrupt(f"stored {stored} bytes, recorded {size}")
    whole = start == 0 and length is None
    end = stored if length is None else min(stored, start + length)
    return _checked(reading.byte_range(fs, path, start, end), digest if whole else None)


def _checked(chunks: Iterator[bytes], digest: str | None) -> Iterator[bytes]:
    h = hashlib.sha256()
    for data in chunks:
        h.update(data)
        yield data
    if digest is not None and f"sha256:{h.hexdigest()}" != digest:
        raise Corrupt(f"read sha256:{h.hexdigest()}, recorded {digest}")


def content_tag(fs, path: str) -> str:  # noqa: ANN001
    """What changes when the object (or any object under the folder) at ``path`` changes: ETags
    where the store has them (S3, MinIO, Ceph; GCS and Azure their own), else size and time.
    One listing request, no download: the key of a node's input cache."""
    import json

    infos = fs.find(path, detail=True, withdirs=False) if fs.isdir(path) else {path: fs.info(path)}
    tags = sorted((name.removeprefix(path), _tag(info)) for name, info in infos.items())
    return hashlib.sha256(json.dumps(tags).encode()).hexdigest()


def _tag(info: dict) -> str:
    for field in ("ETag", "etag", "md5Hash", "content_md5"):
        if info.get(field):
            return f"{field}:{info[field]}"
    when = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or info.get("created")
    return f"size:{info.get('size')}:{when}"
