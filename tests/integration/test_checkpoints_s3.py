"""Checkpoint sets on a real S3-compatible server (moto on loopback): uploaded whole, manifest last;
restored exactly; a half-uploaded set never restored; a missing or corrupt object named by its key;
``trainyard.checkpoint_saved()`` reaching the launcher's sync through its socket."""

from __future__ import annotations

import json

import pytest

from tests.support.s3 import moto_s3
from trainyard.launch.checkpoints import CheckpointError, Store


@pytest.fixture(scope="module")
def s3():
    with moto_s3() as server:
        yield server


@pytest.fixture
def store(s3):
    bucket = s3.bucket()
    st = Store(f"s3://{bucket}/ty/jobs/j1/checkpoints", {"s3": {"endpoint_url": s3.endpoint}})
    st.bucket = bucket
    return st


def sync_for(store, folder, tmp_path, restored=None):  # noqa: ANN001, ANN201
    from trainyard.launch.checkpoint_sync import CheckpointSync

    return CheckpointSync(folder, store, 1, tmp_path / "sets", restored)


def write(folder, files: dict[str, bytes]) -> None:  # noqa: ANN001
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)


def read_all(folder) -> dict[str, bytes]:  # noqa: ANN001
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_set_goes_up_with_its_manifest_last_and_comes_back_exactly(s3, store, tmp_path):
    ck = tmp_path / "ck"
    write(ck, {"model.pt": b"weights" * 10_000, "opt/state.pt": b"adam", "step.tmp": b"half"})
    sync = sync_for(store, ck, tmp_path)
    assert sync.sync(wait=True) is None
    keys = s3.keys(store.bucket)
    assert "ty/jobs/j1/checkpoints/manifest.json" in keys and len([k for k in keys if "/blobs/" in k]) == 2
    assert not (tmp_path / "sets" / "set-1").exists()  # the captured links go once uploaded

    elsewhere = tmp_path / "node-b"
    write(elsewhere, {"stale.pt": b"from an older attempt", "model.pt": b"old"})
    manifest = store.restore(elsewhere)
    assert manifest["attempt"] == 1
    assert read_all(elsewhere) == {"model.pt": b"weights" * 10_000, "opt/state.pt": b"adam"}  # no .tmp, no stale


def test_a_set_cut_off_before_its_manifest_is_never_restored(s3, store, tmp_path):
    ck = tmp_path / "ck"
    write(ck, {"step": b"5"})
    sync = sync_for(store, ck, tmp_path)
    assert sync.sync(wait=True) is None
    # the next set's blob went up, then the launcher died before its manifest: the store holds
    # the new bytes, but nothing names them
    s3.put(store.bucket, "ty/jobs/j1/checkpoints/blobs/sha256-" + "0" * 64, b"6")
    restored = tmp_path / "restored"
    store.restore(restored)
    assert read_all(restored) == {"step": b"5"}

    write(ck, {"step": b"7"})  # a later complete set replaces the earlier one and drops its blob
    assert sync.sync(wait=True) is None
    store.restore(restored)
    assert read_all(restored) == {"step": b"7"}
    assert len([k for k in s3.keys(store.bucket) if "/blobs/" in k]) == 2  # 7's, and the orphan never named


def test_a_missing_or_corrupt_checkpoint_object_is_named_by_its_key(s3, store, tmp_path):
    ck = tmp_path / "ck"
    write(ck, {"model.pt": b"weights" * 1000})
    assert sync_for(store, ck, tmp_path).sync(wait=True) is None
    [blob] = [k for k in s3.keys(store.bucket) if "/blobs/" in k]
    url = f"s3://{store.bucket}/{blob}"

    s3.put(store.bucket, blob, b"\0" * 7000)  # same size, other bytes
    with pytest.raises(CheckpointError, match=f"checkpoint object {url} is corrupt: read sha256:"):
        store.restore(tmp_path / "a")
    assert not list((tmp_path / "a").glob("*"))  # nothing half-restored under the real name
    s3.delete(store.bucket, blob)
    with pytest.raises(CheckpointError, match=f"checkpoint object {url} is missing"):
        store.restore(tmp_path / "b")
    s3.put(store.bucket, "ty/jobs/j1/checkpoints/manifest.json", b"{not json")
    with pytest.raises(CheckpointError, match=f"checkpoint manifest s3://{store.bucket}/ty/jobs/j1/checkpoints/"
                                              "manifest.json is corrupt"):
        store.restore(tmp_path / "c")
    s3.put(store.bucket, "ty/jobs/j1/checkpoints/manifest.json",
           json.dumps({"files": {"../escape": {"size": 1, "digest": "sha256:00"}}}).encode())
    with pytest.raises(CheckpointError, match="unsafe path '../escape'"):
        store.restore(tmp_path / "d")


def test_no_manifest_means_nothing_to_restore_and_the_folder_is_left_alone(store, tmp_path):
    write(tmp_path / "ck", {"keep": b"mine"})
    assert store.restore(tmp_path / "ck") is None
    assert read_all(tmp_path / "ck") == {"keep": b"mine"}


def test_checkpoint_saved_in_the_job_syncs_through_the_launchers_socket(s3, store, tmp_path, monkeypatch):
    import trainyard
    from trainyard import envvars

    monkeypatch.delenv(envvars.CHECKPOINT_SOCKET, raising=False)
    assert trainyard.checkpoint_saved() is False  # no object store: nothing to do, and it says so

    ck = tmp_path / "ck"
    sync = sync_for(store, ck, tmp_path)
    monkeypatch.setenv(envvars.CHECKPOINT_SOCKET, sync.listen())
    write(ck, {"step": b"3"})
    assert trainyard.checkpoint_saved(wait=True) is True
    assert json.loads(s3.get(store.bucket, "ty/jobs/j1/checkpoints/manifest.json"))["files"]["step"]["size"] == 1

    write(ck, {"step": b"4"})
    assert trainyard.checkpoint_saved() is True  # captured; going up in the background
    write(ck, {"step": b"5"})  # the job goes on writing meanwhile
    assert sync.final() is None
    store.restore(tmp_path / "r")
    assert read_all(tmp_path / "r") == {"step": b"5"}


def test_an_upload_that_fails_is_raised_in_the_job_naming_the_object(s3, tmp_path, monkeypatch):
    import trainyard
    from trainyard import envvars

    gone = Store("s3://no-such-bucket-here/ck", {"s3": {"endpoint_url": s3.endpoint}})
    sync = sync_for(gone, tmp_path / "ck", tmp_path)
    monkeypatch.setenv(envvars.CHECKPOINT_SOCKET, sync.listen())
    write(tmp_path / "ck", {"step": b"1"})
    with pytest.raises(RuntimeError, match="checkpoint not saved: cannot upload checkpoint object "
                                           "s3://no-such-bucket-here/ck/blobs/sha256-"):
        trainyard.checkpoint_saved(wait=True)
    sync.close()


def test_a_link_the_job_left_in_its_folder_does_not_lead_a_restore_out_of_it(s3, store, tmp_path):
    ck = tmp_path / "ck"
    write(ck, {"sub/model.pt": b"weights"})
    assert sync_for(store, ck, tmp_path).sync(wait=True) is None
    outside = tmp_path / "outside"
    outside.mkdir()
    node = tmp_path / "node"
    node.mkdir()
    (node / "sub").symlink_to(outside)  # left by an earlier attempt of the job

    store.restore(node)
    assert not (node / "sub").is_symlink() and (node / "sub" / "model.pt").read_bytes() == b"weights"
    assert list(outside.iterdir()) == []


def test_replicas_sharing_a_folder_restore_it_once_per_attempt(s3, store, tmp_path):
    ck = tmp_path / "ck"
    write(ck, {"step": b"5"})
    assert sync_for(store, ck, tmp_path).sync(wait=True) is None
    node = tmp_path / "node"
    store.restore(node, "j1-2")  # replica 0
    write(node, {"step": b"6", "new.pt": b"written by replica 0's job"})
    store.restore(node, "j1-2")  # replica 1 of the same attempt: the folder is the job's already
    assert read_all(node) == {"step": b"6", "new.pt": b"written by replica 0's job"}
    store.restore(node, "j1-3")  # the next attempt starts from the set again
    assert read_all(node) == {"step": b"5"}


@pytest.mark.parametrize("where", ["s3", "folder"])
def test_a_file_written_in_place_between_its_hash_and_its_upload_never_lands_under_that_hash(s3, store, tmp_path,
                                                                                             where):
    from trainyard.launch.checkpoints import capture, describe

    if where == "folder":
        store = Store((tmp_path / "store").as_uri())
    ck, stage = tmp_path / "ck", tmp_path / "set-1"
    write(ck, {"state.bin": b"A" * 70_000})
    stage.mkdir()
    files = describe(stage, capture(ck, stage))
    with open(ck / "state.bin", "r+b") as f:  # the job rewrites the captured file itself, same size
        f.write(b"B" * 1000)
    blob = f"{store.root}/{store.blob_name(files['state.bin']['digest'])}"
    with pytest.raises(CheckpointError, match="checkpoint file state.bin was written in place while its set went up"):
        store.upload(stage, files, 1, None)
    assert not store.fs.exists(blob) and store.manifest() is None  # no blob with other bytes than its name says

    with open(ck / "state.bin", "r+b") as f:  # and back: the next set names the same digest, and its bytes go up
        f.write(b"A" * 1000)
    store.upload(stage, files, 1, None)
    store.restore(tmp_path / "elsewhere")
    assert read_all(tmp_path / "elsewhere") == {"state.bin": b"A" * 70_000}
