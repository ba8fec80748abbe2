"""What a sync captures of the job's checkpoint folder, which the job (its account) controls while a root launcher
reads it: regular files only, never a file a link leads to, even one swapped in while the folder is walked."""

from __future__ import annotations

import os

from trainyard.launch import checkpoints
from trainyard.launch.checkpoints import capture


def test_regular_files_are_captured_and_links_and_scratch_files_are_not(tmp_path):
    folder, stage, outside = tmp_path / "ck", tmp_path / "stage", tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_text("root's")
    (folder / "model.pt").write_bytes(b"weights")
    (folder / "sub" / "opt.pt").write_bytes(b"moments")
    (folder / "step.tmp").write_text("being written")
    (folder / "leak").symlink_to(outside / "secret")
    (folder / "dir").symlink_to(outside, target_is_directory=True)
    stage.mkdir()
    assert capture(folder, stage) == ["model.pt", "sub/opt.pt"]
    assert (stage / "sub" / "opt.pt").read_bytes() == b"moments"
    assert sorted(p.name for p in stage.rglob("*")) == ["model.pt", "opt.pt", "sub"]


def test_a_file_swapped_for_a_link_while_the_folder_is_walked_is_dropped_not_followed(tmp_path, monkeypatch):
    folder, stage, secret = tmp_path / "ck", tmp_path / "stage", tmp_path / "secret"
    folder.mkdir()
    stage.mkdir()
    secret.write_text("root's")
    (folder / "a.pt").write_bytes(b"weights")
    (folder / "b.pt").write_bytes(b"kept")
    walk = checkpoints.walk_held

    def swapping(*args, **kw):  # noqa: ANN002, ANN003
        for root, dirs, names, fd in walk(*args, **kw):
            os.unlink("a.pt", dir_fd=fd)  # listed as a file; a link by the time it is captured
            os.symlink(secret, "a.pt", dir_fd=fd)
            yield root, dirs, names, fd

    monkeypatch.setattr(checkpoints, "walk_held", swapping)
    assert capture(folder, stage) == ["b.pt"]
    assert not (stage / "a.pt").exists() and not (stage / "a.pt").is_symlink()


class Blobs(checkpoints.Store):
    """A store of one set, in memory: what a restore reads."""

    def __init__(self, files: dict[str, bytes]) -> None:
        import hashlib

        self.url = "memory://ck"
        self.blobs = {f"sha256:{hashlib.sha256(b).hexdigest()}": b for b in files.values()}
        self.entries = {p: {"size": len(b), "digest": f"sha256:{hashlib.sha256(b).hexdigest()}"}
                        for p, b in files.items()}

    def _fetch(self, entry, parent, name):  # noqa: ANN001
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=parent)
        with open(fd, "wb") as f:
            f.write(self.blobs[entry["digest"]])


def test_a_folder_swapped_for_a_link_during_a_restore_leads_no_write_or_removal_outside(tmp_path, monkeypatch):
    folder, outside = tmp_path / "ck", tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "keep").write_text("root's")
    (folder / "stale.pt").write_text("after the last set")
    store = Blobs({"sub/model.pt": b"weights", "top.pt": b"top"})
    holds = checkpoints._holds

    def swapping(parent, name, entry):  # noqa: ANN001
        if name == "model.pt" and not (folder / "sub").is_symlink():  # the account's other process, meanwhile
            (folder / "sub").rename(folder / "sub.old")
            (folder / "sub").symlink_to(outside, target_is_directory=True)
        return holds(parent, name, entry)

    monkeypatch.setattr(checkpoints, "_holds", swapping)
    store._mirror(store.entries, folder)
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]
    assert (folder / "top.pt").read_bytes() == b"top" and not (folder / "stale.pt").exists()
    assert not (folder / "sub").is_symlink()  # the job's link is gone, not followed


def test_a_folder_swapped_for_a_link_to_a_fifo_after_it_was_listed_is_not_opened(tmp_path, monkeypatch):
    import contextlib

    from trainyard.launch import files

    folder, stage, fifo = tmp_path / "ck", tmp_path / "stage", tmp_path / "fifo"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "x.pt").write_bytes(b"x")
    (folder / "top.pt").write_bytes(b"top")
    stage.mkdir()
    os.mkfifo(fifo)  # opened as root, it would block the capture for good
    listed = files.os.scandir

    def listing(fd):  # noqa: ANN001
        with listed(fd) as it:
            entries = list(it)
        if (folder / "sub").is_dir() and not (folder / "sub").is_symlink():  # the account, right after the listing
            (folder / "sub").rename(folder / "sub.gone")
            (folder / "sub").symlink_to(fifo)
        return contextlib.nullcontext(entries)

    monkeypatch.setattr(files.os, "scandir", listing)
    assert capture(folder, stage) == ["top.pt"]
