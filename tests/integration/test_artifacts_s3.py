"""The artifact store on a real S3-compatible server (moto on loopback): writes that are whole or
absent, reads checked against their records, and a plain error for a store that cannot be used."""

from __future__ import annotations

import hashlib
import io

import pytest

from tests.support.s3 import moto_s3, strict_moto_s3
from trainyard.errors import ObjectCorrupt, ObjectMissing, StorageError


@pytest.fixture(scope="module")
def s3():
    with moto_s3() as server:
        yield server


def store_on(s3, bucket: str):  # noqa: ANN201
    from trainyard.artifacts.store import ArtifactStore

    return ArtifactStore(f"s3://{bucket}/ty", {"s3": {"endpoint_url": s3.endpoint}})


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_probe_passes_and_leaves_nothing(s3):
    bucket = s3.bucket()
    store_on(s3, bucket).probe()
    assert s3.keys(bucket) == []


def test_snapshot_lands_under_its_digest_and_a_wrong_one_leaves_nothing(s3):
    bucket = s3.bucket()
    store, blob = store_on(s3, bucket), b"tarball" * 100_000
    url = store.put_snapshot(io.BytesIO(blob), digest(blob))
    key = f"ty/snapshots/{digest(blob).replace(':', '-')}.tar.gz"
    assert url == f"s3://{bucket}/{key}" and s3.get(bucket, key) == blob
    with pytest.raises(ValueError, match="does not match"):
        store.put_snapshot(io.BytesIO(b"other"), digest(b"different"))
    assert s3.keys(bucket) == [key]  # no temporary key left behind


def test_read_streams_a_checked_object_and_names_the_key_of_a_bad_one(s3):
    bucket = s3.bucket()
    store, data = store_on(s3, bucket), b"x" * (3 << 20)
    key = "ty/jobs/j1/1/outputs/model.bin"
    s3.put(bucket, key, data)
    url = f"s3://{bucket}/{key}"
    assert b"".join(store.read(url, len(data), digest(data))) == data

    s3.put(bucket, key, data[:-1])  # another size: refused before the first byte
    with pytest.raises(ObjectCorrupt, match=f"object {url} is corrupt"):
        store.read(url, len(data), digest(data))
    s3.put(bucket, key, b"y" * len(data))  # same size, other bytes: known after the last one
    with pytest.raises(ObjectCorrupt, match=f"object {url} is corrupt"):
        b"".join(store.read(url, len(data), digest(data)))
    s3.delete(bucket, key)
    with pytest.raises(ObjectMissing, match=f"object {url} is missing"):
        store.read(url, len(data), digest(data))


def test_put_file_checks_the_stored_size_and_returns_the_digest(s3, tmp_path):
    from trainyard.artifacts.transfer import open_fs, put_file

    bucket = s3.bucket()
    src = tmp_path / "weights.bin"
    src.write_bytes(b"w" * 1_000_000)
    fs, path = open_fs(f"s3://{bucket}/out/weights.bin", {"s3": {"endpoint_url": s3.endpoint}})
    assert put_file(fs, src, path) == (1_000_000, digest(src.read_bytes()))
    assert s3.get(bucket, "out/weights.bin") == src.read_bytes()


def test_a_missing_bucket_is_a_plain_error(s3):
    with pytest.raises(StorageError, match=r"s3://no-such-bucket-x/ty: cannot write \.trainyard-probe-"):
        store_on(s3, "no-such-bucket-x").probe()


def test_wrong_credentials_are_a_plain_error():
    from trainyard.artifacts.store import ArtifactStore

    with strict_moto_s3() as endpoint:
        store = ArtifactStore("s3://b/ty", {"s3": {"endpoint_url": endpoint}})
        with pytest.raises(StorageError, match="s3://b/ty: cannot write") as e:
            store.probe()
    assert "Traceback" not in e.value.message


def test_an_unreachable_endpoint_is_a_plain_error():
    from trainyard.artifacts.store import ArtifactStore

    store = ArtifactStore("s3://b/ty", {"s3": {"endpoint_url": "http://127.0.0.1:9", "config_kwargs": {
        "retries": {"max_attempts": 1}, "connect_timeout": 2}}})
    with pytest.raises(StorageError, match="s3://b/ty: cannot write"):
        store.probe()


def test_a_lookup_the_store_refuses_is_a_storage_error_naming_the_key():
    from trainyard.artifacts.store import ArtifactStore

    with strict_moto_s3() as endpoint:
        store = ArtifactStore("s3://bucket/ty", {"s3": {"endpoint_url": endpoint}})
        d = digest(b"code")
        with pytest.raises(StorageError, match=f"artifact store s3://bucket/ty: cannot look up "
                                               f"snapshots/{d.replace(':', '-')}.tar.gz: "):
            store.has_snapshot(d)
        with pytest.raises(StorageError, match="cannot look up values/v1"):
            store.put_bytes("values/v1", b"42")


def test_a_range_is_read_as_one_get_in_chunks_and_dropped_when_the_reader_stops(s3):
    """One request per range, however many chunks it is handed on in: what keeps the server's memory flat
    and its reads at the store's pace (many small range requests cost a round trip each)."""
    import s3fs

    from trainyard.artifacts import reading

    bucket, data = s3.bucket(), bytes(range(256)) * (12 << 12)  # 3 MiB
    s3.put(bucket, "big.bin", data)
    fs = s3fs.S3FileSystem(endpoint_url=s3.endpoint, skip_instance_cache=True)
    fs.connect()
    gets: list[str] = []
    fs.s3.meta.events.register("before-call.s3.GetObject", lambda params, **_: gets.append(params["headers"]["Range"]))
    chunks = list(reading.byte_range(fs, f"{bucket}/big.bin", 5, len(data) - 3, chunk=1 << 20))
    assert b"".join(chunks) == data[5:-3] and max(map(len, chunks)) == 1 << 20
    assert gets == [f"bytes=5-{len(data) - 4}"]
    stream = reading.byte_range(fs, f"{bucket}/big.bin", 0, len(data), chunk=1 << 16)
    assert next(stream) == data[: 1 << 16]
    stream.close()  # a client gone: its request is dropped, and the filesystem still reads
    assert b"".join(reading.byte_range(fs, f"{bucket}/big.bin", len(data) - 10, len(data))) == data[-10:]
    with pytest.raises(FileNotFoundError):
        list(reading.byte_range(fs, f"{bucket}/gone.bin", 0, 10))


def test_an_interrupted_upload_leaves_nothing_that_looks_complete(s3, tmp_path, monkeypatch):
    """A multipart upload cut off after its first part is aborted (no key, no upload left open), and a
    stream cut off mid-way (a client gone during a snapshot PUT) leaves neither its key nor its temporary one."""
    import s3fs

    from trainyard.artifacts.transfer import open_fs, put_file, write_stream

    bucket = s3.bucket()
    monkeypatch.setattr(s3fs.core, "calculate_chunksize", lambda size, chunksize=None: 5 << 20)  # parts at 10 MiB
    src = tmp_path / "model.bin"
    src.write_bytes(b"m" * (12 << 20))
    fs, path = open_fs(f"s3://{bucket}/out/model.bin", {"s3": {"endpoint_url": s3.endpoint}})
    call, parts = fs._call_s3, []

    async def cut_after_one_part(method, *args, **kwargs):  # noqa: ANN001, ANN202
        if method == "upload_part":
            parts.append(kwargs["PartNumber"])
            if len(parts) > 1:
                raise ConnectionResetError("connection reset by peer")
        return await call(method, *args, **kwargs)

    monkeypatch.setattr(fs, "_call_s3", cut_after_one_part)
    with pytest.raises(ConnectionResetError):
        put_file(fs, src, path)
    assert len(parts) > 1 and s3.keys(bucket) == []
    assert s3.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    monkeypatch.undo()

    def cut_stream():  # noqa: ANN202
        yield b"s" * (9 << 20)  # past one 5 MiB part: a multipart upload under way
        raise ConnectionResetError("client went away")

    fs, path = open_fs(f"s3://{bucket}/snapshots/x.tar.gz", {"s3": {"endpoint_url": s3.endpoint}})
    with pytest.raises(ConnectionResetError):
        write_stream(fs, path, cut_stream())
    assert s3.keys(bucket) == []


def test_a_range_cut_off_mid_way_goes_on_from_the_byte_it_stopped_at(s3):
    import s3fs

    from tests.support.cut_proxy import CutProxy
    from trainyard.artifacts import reading

    bucket, data = s3.bucket(), bytes(range(256)) * (12 << 12)  # 3 MiB
    s3.put(bucket, "big.bin", data)
    host, port = s3.endpoint.removeprefix("http://").split(":")
    proxy = CutProxy((host, int(port)), cut_after=(1 << 20) + 12345)  # the first connection, mid-chunk
    try:
        fs = s3fs.S3FileSystem(endpoint_url=proxy.endpoint, skip_instance_cache=True)
        fs.connect()
        gets: list[str] = []
        fs.s3.meta.events.register("before-call.s3.GetObject",
                                   lambda params, **_: gets.append(params["headers"]["Range"]))
        assert b"".join(reading.byte_range(fs, f"{bucket}/big.bin", 0, len(data))) == data
    finally:
        proxy.close()
    # asked again from the end of the last whole chunk it got, not from the start: two chunks came before
    # the cut, or one when the cut's reset also threw away bytes the client had not read yet (under load)
    assert proxy.cuts == 1 and len(gets) == 2 and gets[0] == f"bytes=0-{len(data) - 1}"
    assert gets[1] in (f"bytes={n * reading.CHUNK}-{len(data) - 1}" for n in (1, 2)), gets
