"""What gets uploaded, where, and how it is recorded."""

from __future__ import annotations

import hashlib

from trainyard.launch.outputs import collect, over_bound, upload


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
    records, errors = upload({"sub/x.bin": src}, f"file://{dest}", (tmp_path,))
    assert errors == []
    assert records == [{"path": "sub/x.bin", "size": 5, "digest": "sha256:" + hashlib.sha256(b"hello").hexdigest()}]
    assert (dest / "sub" / "x.bin").read_bytes() == b"hello"


def test_upload_errors_are_reported_not_raised(tmp_path):
    src = tmp_path / "x.bin"
    src.write_bytes(b"hello")
    blocker = tmp_path / "store"
    blocker.write_text("a file where a folder should be")
    records, errors = upload({"x.bin": src}, str(blocker), (tmp_path,))
    assert records == [] and len(errors) == 1 and "x.bin" in errors[0]


def test_upload_through_fsspec(tmp_path):
    import fsspec

    src = tmp_path / "x.bin"
    src.write_bytes(b"data")
    records, errors = upload({"a/x.bin": src}, "memory://ty-out/run1", (tmp_path,))
    assert errors == [] and records[0]["size"] == 4
    assert fsspec.filesystem("memory").cat("/ty-out/run1/a/x.bin") == b"data"


def test_links_out_of_the_job_are_skipped_and_said_so(tmp_path):
    out, work, host = tmp_path / "outputs", tmp_path / "work", tmp_path / "host"
    for d in (out, work, host):
        d.mkdir()
    (host / "hostname").write_text("the host's")
    (out / "model.bin").write_bytes(b"m")
    (out / "hostname").symlink_to(host / "hostname")
    (out / "etc").symlink_to(host, target_is_directory=True)
    (out / "alias").symlink_to("model.bin")  # a link inside the outputs: another name of model.bin, kept
    (work / "logs").symlink_to(host, target_is_directory=True)
    (work / "notes.txt").write_text("n")
    (work / "secret").symlink_to(host / "hostname")

    files, problems = collect(out, work, ["logs/*", "logs", "*.txt", "secret"])

    assert sorted(files) == ["alias", "model.bin", "notes.txt"] and files["alias"] == (out / "model.bin").resolve()
    for name in ("hostname", "etc", "logs", "secret"):
        assert any(f"output {name!r} skipped" in p for p in problems), (name, problems)
    # what is behind a link the job made is not said to it (the launcher may see what the job may not)
    assert "output glob 'logs/*' skipped under 'logs': a link is not followed" in problems
    assert not any("logs/hostname" in p or str(host) in p for p in problems), problems


def test_a_file_swapped_for_a_link_after_the_look_is_not_uploaded(tmp_path):
    out, work, host = tmp_path / "outputs", tmp_path / "work", tmp_path / "host"
    for d in (out, work, host, work / "sub"):
        d.mkdir()
    (host / "shadow").write_text("root's")
    (out / "model.bin").write_bytes(b"m")
    (work / "sub" / "a.txt").write_text("a")
    files, _ = collect(out, work, ["sub/*"])
    assert sorted(files) == ["model.bin", "sub/a.txt"]
    (out / "model.bin").unlink()
    (out / "model.bin").symlink_to(host / "shadow")  # another job of the account, between the look and the upload
    (work / "sub").rename(work / "old")
    (work / "sub").symlink_to(host, target_is_directory=True)
    (host / "a.txt").write_text("host's")
    dest = tmp_path / "store"

    records, errors = upload(files, f"file://{dest}", (out, work))

    assert records == [] and len(errors) == 2, errors
    assert not dest.exists() or not any(p.is_file() for p in dest.rglob("*"))
    # swapped before collect's last look, so that it took the link's target for the file: still not uploaded
    records, errors = upload({"model.bin": host / "shadow"}, f"file://{dest}", (out, work))
    assert records == [] and "moved or reached through a new link" in errors[0]


def test_a_linked_outputs_folder_is_not_walked(tmp_path):
    host, work = tmp_path / "host", tmp_path / "work"
    host.mkdir()
    work.mkdir()
    (host / "hostname").write_text("the host's")
    (tmp_path / "outputs").symlink_to(host, target_is_directory=True)

    files, problems = collect(tmp_path / "outputs", work, [])

    assert files == {} and "is a link" in problems[0]


def test_a_file_is_collected_under_each_of_its_names_and_counted_once_per_name(tmp_path):
    out, work = tmp_path / "outputs", tmp_path / "work"
    out.mkdir()
    work.mkdir()
    (out / "z.bin").write_bytes(b"z" * 100)
    (out / "a-link.bin").symlink_to("z.bin")
    (out / "y-hard.bin").hardlink_to(out / "z.bin")

    files, problems = collect(out, work, [])

    assert sorted(files) == ["a-link.bin", "y-hard.bin", "z.bin"] and problems == []
    assert over_bound(files, 300) is None and "3 files" in over_bound(files, 299)


def test_the_bound_counts_what_the_store_would_hold(tmp_path):
    sparse = tmp_path / "sparse.bin"
    with open(sparse, "wb") as f:
        f.truncate(3 << 30)
    assert over_bound({"sparse.bin": sparse}, None) is None and over_bound({"sparse.bin": sparse}, 0) is None
    assert over_bound({"sparse.bin": sparse}, 3 << 30) is None
    assert "1 files of 3.00 GiB in all, over this server's bound of 2.00 GiB" in over_bound({"s": sparse}, 2 << 30)


def test_upload_sends_no_more_than_its_bound_counting_each_name(tmp_path):
    (tmp_path / "a").write_bytes(b"a" * 10)
    (tmp_path / "b").hardlink_to(tmp_path / "a")  # a name added since collect looked: a copy, counted
    (tmp_path / "c").write_bytes(b"c" * 10)
    (tmp_path / "d").write_bytes(b"d")
    dest = tmp_path / "store"
    files = {n: tmp_path / n for n in "abcd"}

    records, errors = upload(files, f"file://{dest}", (tmp_path,), limit=21)

    assert [r["path"] for r in records] == ["a", "b", "d"]
    assert errors == ["output c: over the bound of 0.0 MiB on outputs (outputs_max)"]
