"""What gets uploaded, where, and how it is recorded."""

from __future__ import annotations

import hashlib

from trainyard.launch.outputs import collect, upload


def test_outputs_dir_and_globs_at_relative_paths(tmp_path):
    out, work = tmp_path / "outputs", tmp_path / "work"
    (out / "model").mkdir(parents=True)
    (out / "model" / "weights.bin").write_bytes(b"w" * 10)
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "a.txt").write_text("a")
    (work / "report.html").write_text("<p>")
    (work / "skip.tmp").write_text("no")
    files, problems = collect(out, work, ["logs", "*.html", "../etc/*", "/abs/*"])
    assert sorted(files) == ["logs/a.txt", "model/weights.bin", "report.html"]
    assert len(problems) == 2


def test_upload_to_local_folder_records_size_and_digest(tmp_path):
    src = tmp_path / "x.bin"
    src.write_bytes(b"hello")
    dest = tmp_path / "store"
    records, errors = upload({"sub/x.bin": src}, f"file://{dest}")
    assert errors == []
    assert records == [{"path": "sub/x.bin", "size": 5, "digest": "sha256:" + hashlib.sha256(b"hello").hexdigest()}]
    assert (dest / "sub" / "x.bin").read_bytes() == b"hello"


def test_upload_errors_are_reported_not_raised(tmp_path):
    src = tmp_path / "x.bin"
    src.write_bytes(b"hello")
    blocker = tmp_path / "store"
    blocker.write_text("a file where a folder should be")
    records, errors = upload({"x.bin": src}, str(blocker))
    assert records == [] and len(errors) == 1 and "x.bin" in errors[0]


def test_upload_through_fsspec(tmp_path):
    import fsspec

    src = tmp_path / "x.bin"
    src.write_bytes(b"data")
    records, errors = upload({"a/x.bin": src}, "memory://ty-out/run1")
    assert errors == [] and records[0]["size"] == 4
    assert fsspec.filesystem("memory").cat("/ty-out/run1/a/x.bin") == b"data"
