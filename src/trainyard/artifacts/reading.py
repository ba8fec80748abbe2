"""Reading a byte range of an object as one stream, with a bounded buffer.

One request per range, read in chunks as they arrive: the store sends at its own pace, and the
reader holds a few chunks (the one being handed on and the next one being read), whatever the
range's size. Reading a range as many small range requests instead costs a round trip each, and
fetching whole blocks at a time made a server streaming four ranges grow by tens of MiB (glibc keeps
the freed multi-MiB buffers of each thread's arena).

- S3 (and the S3-compatible): one ranged ``GetObject``, its body read in chunks on s3fs's event loop,
  the next chunk asked for while the last is handed on. A connection lost mid-range is asked again
  from the byte it stopped at (s3fs's retries already cover the request itself).
- A local folder: the file itself, read in chunks.
- Any other fsspec store: its buffered file with no cache, a range request per chunk.

Standard library and fsspec only: the launcher imports it through :mod:`trainyard.artifacts.transfer`.
"""

from __future__ import annotations

from typing import Iterator

# a server streams several ranges at once (the SDK asks for 4): each holds about 4 chunks (the one
# handed on, the next one, their joins and the socket's buffer), 1 MiB chunks made that +17 MiB
CHUNK = 512 << 10
RECONNECTS = 3


def byte_range(fs, path: str, start: int, end: int, chunk: int = CHUNK) -> Iterator[bytes]:  # noqa: ANN001
    """The bytes ``[start, end)`` of ``path`` in pieces of at most ``chunk``; fewer when the object is shorter."""
    if start >= end:
        return iter(())
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    if {"s3", "s3a"}.intersection(protocols) and hasattr(fs, "_call_s3"):
        return _s3(fs, path, start, end, chunk)
    if {"file", "local"}.intersection(protocols):
        return _opened(fs.open(path, "rb"), start, end, chunk)
    return _opened(fs.open(path, "rb", block_size=chunk, cache_type="none"), start, end, chunk)


def _opened(f, start: int, end: int, chunk: int) -> Iterator[bytes]:  # noqa: ANN001
    with f:
        f.seek(start)
        at = start
        while at < end and (data := f.read(min(chunk, end - at))):
            at += len(data)
            yield data


def _s3(fs, path: str, start: int, end: int, chunk: int) -> Iterator[bytes]:  # noqa: ANN001
    import asyncio

    from fsspec.asyn import sync

    bucket, key, version = fs.split_path(path)
    extra = {"VersionId": version} if version else {}

    async def get(first: int):  # noqa: ANN202
        resp = await fs._call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes={first}-{end - 1}", **extra)
        return resp["Body"]

    async def fill(body) -> bytes:  # noqa: ANN001
        """Up to ``chunk`` bytes (fewer only at the end): the body gives what has arrived, often 64 KiB."""
        parts, have = [], 0
        while have < chunk:
            part = await body.read(chunk - have)
            if not part:
                break
            parts.append(part)
            have += len(part)
        return b"".join(parts)

    at, body, reconnects = start, None, 0
    ahead = None  # the next chunk, read on s3fs's loop while this thread hands the last one on
    try:
        while at < end:
            if body is None:  # a missing key or a refused request raises here, as s3fs says it
                body = sync(fs.loop, get, at)
            try:
                data = ahead.result() if ahead is not None else sync(fs.loop, fill, body)
            except (ConnectionError, TimeoutError, asyncio.TimeoutError, *_client_errors()) as e:
                _close(fs, body)
                ahead, body = None, None
                reconnects += 1
                if reconnects > RECONNECTS:
                    raise OSError(f"{path}: the connection broke off at byte {at} ({e})") from e
                continue
            ahead = None
            if not data:
                return  # shorter than asked: the caller's size or digest check tells
            at += len(data)
            if at < end:
                ahead = asyncio.run_coroutine_threadsafe(fill(body), fs.loop)
            yield data
    finally:  # a reader gone mid-range: the request is dropped, not read to its end
        if ahead is not None:
            ahead.cancel()
        _close(fs, body)


def _client_errors() -> tuple[type[BaseException], ...]:
    """What a body read raises when the connection breaks (aiohttp's, botocore's read timeout)."""
    found: list[type[BaseException]] = []
    try:
        from aiohttp import ClientError

        found.append(ClientError)
    except ImportError:
        pass
    try:
        from botocore.exceptions import ReadTimeoutError

        found.append(ReadTimeoutError)
    except ImportError:
        pass
    return tuple(found)


def _close(fs, body) -> None:  # noqa: ANN001
    """Drop the connection on the loop that owns it (aiohttp is not thread-safe)."""
    if body is not None:
        fs.loop.call_soon_threadsafe(_drop, body)


def _drop(body) -> None:  # noqa: ANN001
    import asyncio

    closing = body.close()  # aiohttp's body closes at once; aiobotocore's httpx one returns a coroutine
    if asyncio.iscoroutine(closing):
        asyncio.ensure_future(closing)
