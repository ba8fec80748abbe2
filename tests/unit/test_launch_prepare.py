"""Work dir from a snapshot (safely), and inputs: local in place, URLs fetched once."""

from __future__ import annotations

import io
import os
from pathlib import Path
import tarfile

import pytest

from tests.conftest import need_readonly_mounts

from trainyard.launch import prepare, untar
from trainyard.launch.files import local_path
from trainyard.launch.prepare import SetupError, prepare_workdir, resolve_inputs, safe_extract


def make_tar(path, members):
    """members: (name, bytes) for files, (name, ("sym"|"hard", target)) for links."""
    with tarfile.open(path, "w:gz") as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type = tarfile.SYMTYPE if content[0] == "sym" else tarfile.LNKTYPE
                info.linkname = content[1]
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return path


def test_snapshot_extracted_as_work_dir(tmp_path):
    snap = make_tar(tmp_path / "code.tar.gz", [("train.py", b"print(1)\n"), ("pkg/mod.py", b"x = 1\n"),
                                               ("pkg/link.py", ("sym", "mod.py"))])
    work = prepare_workdir(f"file://{snap}", tmp_path / "a" / "work")
    assert (work / "train.py").read_text() == "print(1)\n"
    assert (work / "pkg" / "link.py").read_text() == "x = 1\n"


def test_no_snapshot_gives_empty_work_dir(tmp_path):
    work = prepare_workdir(None, tmp_path / "work")
    assert work.is_dir() and not any(work.iterdir())


@pytest.mark.parametrize("members", [
    [("/etc/evil", b"x")],
    [("../evil", b"x")],
    [("a/../../evil", b"x")],
    [("link", ("sym", "/etc/passwd"))],
    [("a/link", ("sym", "../../outside"))],
    [("hard", ("hard", "../outside"))],
])
def test_unsafe_archives_are_refused(tmp_path, members):
    snap = make_tar(tmp_path / "bad.tar.gz", members)
    dest = tmp_path / "dest" / "work"
    dest.mkdir(parents=True)
    with pytest.raises(SetupError), open(snap, "rb") as f:
        safe_extract(f, dest)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "dest" / "evil").exists()


@pytest.mark.parametrize("members", [
    [("l", ("sym", "d/../x")), ("d/x", b"")],  # a name then '..': not where the text says when d is a link
    [("a", ("sym", "d")), ("d/x", b""), ("a/y", ("sym", "x"))],  # a link made inside another link
    [("a", ("sym", "d")), ("a/x", b"")],  # a file through a link: a's folder is made first, the link then refused
    [("h", ("hard", "nope"))],  # a hard link to nothing of the archive
])
def test_links_are_made_last_and_never_through_another_link(tmp_path, members):
    snap = make_tar(tmp_path / "bad.tar.gz", members)
    dest = tmp_path / "dest" / "work"
    dest.mkdir(parents=True)
    with pytest.raises(SetupError, match="snapshot"), open(snap, "rb") as f:
        safe_extract(f, dest)


def test_a_chain_of_links_past_path_max_cannot_write_outside(tmp_path):
    """CVE-2025-4517: links nested past PATH_MAX made tarfile's data filter (before 3.11.13) judge a path by its
    text; a later member was written through the chain to anywhere."""
    victim = tmp_path / "victim.txt"
    victim.write_text("original\n")
    dest = tmp_path / "work"
    dest.mkdir()
    steps, comp = "abcdefghijklmnop", "d" * min((4095 - len(str(dest))) // 16 - 1, 254)

    def info(name, **attrs):
        member = tarfile.TarInfo(name)
        for k, v in attrs.items():
            setattr(member, k, v)
        return member

    with tarfile.open(tmp_path / "chain.tar.gz", "w:gz", format=tarfile.PAX_FORMAT) as tar:
        path = ""
        for s in steps:
            tar.addfile(info(os.path.join(path, comp), type=tarfile.DIRTYPE, mode=0o755))
            tar.addfile(info(os.path.join(path, s), type=tarfile.SYMTYPE, linkname=comp))
            path = os.path.join(path, comp)
        deep = os.path.join(*steps, "l" * 254)
        tar.addfile(info(deep, type=tarfile.SYMTYPE, linkname="/".join([".."] * 16)))
        for name in ("escape", "escape2"):  # with the name-then-.. target, and without (a link through links)
            target = deep + "/.." * 17 if name == "escape" else deep
            tar.addfile(info(name, type=tarfile.SYMTYPE, linkname=target))
        payload = b"PWNED\n"
        tar.addfile(info("escape2/" + str(victim).lstrip("/"), size=len(payload)), io.BytesIO(payload))
    with pytest.raises(SetupError, match="snapshot"), open(tmp_path / "chain.tar.gz", "rb") as f:
        safe_extract(f, dest)
    assert victim.read_text() == "original\n"


def test_links_inside_the_archive_resolve_and_too_much_is_refused(tmp_path, monkeypatch):
    snap = make_tar(tmp_path / "ok.tar.gz", [("pkg/sub/mod.py", b"x = 1\n"), ("pkg/up.py", ("sym", "sub/mod.py")),
                                             ("pkg/sub/back", ("sym", "../up.py")), ("top", ("sym", "pkg/sub/back")),
                                             ("copy.py", ("hard", "pkg/sub/mod.py")), ("pkg/up.py", b"replaced\n")])
    dest = tmp_path / "work"
    dest.mkdir()
    with open(snap, "rb") as f:
        safe_extract(f, dest)
    assert (dest / "top").read_text() == "x = 1\n" and (dest / "top").is_symlink()  # the later link replaced the file
    assert (dest / "copy.py").read_text() == "x = 1\n" and not (dest / "copy.py").is_symlink()
    monkeypatch.setattr(untar, "MAX_BYTES", 10)
    big = make_tar(tmp_path / "big.tar.gz", [("a", b"123456"), ("b", b"78901")])
    with pytest.raises(SetupError, match="more than 0 GiB once extracted"), open(big, "rb") as f:
        safe_extract(f, tmp_path / "work2")
    monkeypatch.setattr(untar, "MAX_MEMBERS", 1)
    with pytest.raises(SetupError, match="more than 1 members"), open(big, "rb") as f:
        safe_extract(f, tmp_path / "work2")
    assert not (tmp_path / "work2").exists()


def test_missing_or_corrupt_snapshot_is_setup_error(tmp_path):
    with pytest.raises(SetupError, match="snapshot"):
        prepare_workdir(str(tmp_path / "nope.tar.gz"), tmp_path / "work")
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(SetupError, match="snapshot"):
        prepare_workdir(str(tmp_path / "junk.tar.gz"), tmp_path / "work")


def test_local_path_forms(tmp_path):
    assert local_path("/data/x") == local_path("file:///data/x")
    assert str(local_path("file:///data/a%20b")) == "/data/a b"
    assert local_path("rel/x", base=tmp_path) == tmp_path / "rel" / "x"
    assert local_path("s3://bucket/x") is None
    assert local_path("memory://x") is None


def test_no_form_of_url_makes_the_launcher_copy_a_local_file_into_the_shared_cache(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root's")
    got = resolve_inputs({"a": f"local://{secret}"}, tmp_path / "cache", tmp_path)
    assert got == {"a": str(secret)}  # read in place, by the job's own account
    for url in (f"simplecache::file://{secret}", f"filecache::local://{secret}", f"dir::file://{tmp_path}"):
        with pytest.raises(SetupError, match="a chain of URLs"):
            resolve_inputs({"b": url}, tmp_path / "cache", tmp_path)
    with pytest.raises(SetupError, match="read in place"):
        prepare.fetch_input(f"file://{secret}", tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_local_inputs_used_in_place(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a,b\n")
    got = resolve_inputs({"data": f"file://{data}", "same": str(data)}, tmp_path / "cache", tmp_path)
    assert got == {"data": str(data), "same": str(data)}
    assert not (tmp_path / "cache").exists()


def test_missing_input_names_it(tmp_path):
    with pytest.raises(SetupError, match="'train'"):
        resolve_inputs({"train": str(tmp_path / "nope")}, tmp_path / "cache", tmp_path)


def test_url_inputs_fetched_once_per_content_into_cache(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/ty-test/file.txt", b"hello")
    fs.pipe("/ty-test/folder/a.txt", b"A")
    fs.pipe("/ty-test/folder/sub/b.txt", b"B")
    cache = tmp_path / "cache"
    got = resolve_inputs({"f": "memory://ty-test/file.txt", "d": "memory://ty-test/folder"}, cache, tmp_path)
    assert got["f"].startswith(str(cache)) and open(got["f"]).read() == "hello"
    assert open(f"{got['d']}/sub/b.txt").read() == "B"
    assert not os.access(got["f"], os.W_OK) or os.geteuid() == 0  # read-only, for all but root
    assert Path(got["f"]).stat().st_mode & 0o222 == 0 and Path(got["d"], "sub").stat().st_mode & 0o222 == 0
    os.chmod(got["f"], 0o644)
    (Path(got["f"])).write_text("from the cache")  # the same content again: taken from the cache
    again = resolve_inputs({"f": "memory://ty-test/file.txt"}, cache, tmp_path)
    assert again["f"] == got["f"] and open(again["f"]).read() == "from the cache"
    fs.pipe("/ty-test/file.txt", b"changed")  # another content: fetched again, beside the old one
    changed = resolve_inputs({"f": "memory://ty-test/file.txt"}, cache, tmp_path)
    assert changed["f"] != got["f"] and open(changed["f"]).read() == "changed"
    with pytest.raises(SetupError, match="'gone'"):
        resolve_inputs({"gone": "memory://ty-test/missing"}, cache, tmp_path)
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


def test_a_cached_input_is_a_read_only_mount_for_a_root_job(tmp_path):
    """Permission bits do not stop root: the job's own mount namespace does, and the cache stays intact."""
    import subprocess

    import fsspec

    from trainyard.launch import readonly
    from trainyard.launch.prepare import cache_entries

    need_readonly_mounts()
    fsspec.filesystem("memory").pipe("/ty-ro/folder/a.txt", b"A")
    cache = tmp_path / "cache"
    got = resolve_inputs({"d": "memory://ty-ro/folder", "local": str(tmp_path)}, cache, tmp_path)
    entries = cache_entries(got, cache)
    assert entries == [str(Path(got["d"]).parent)]  # the fetched one only: a local input is the user's
    writes = (f"echo x >> {got['d']}/a.txt; echo $?; touch {got['d']}/new; echo $?; rm -rf {got['d']}; echo $?; "
              f"touch {tmp_path}/mine; echo $?")
    r = subprocess.run(readonly.mount_prefix(entries) + ["sh", "-c", writes], capture_output=True, text=True)
    assert [code != "0" for code in r.stdout.split()] == [True, True, True, False], r  # refused in the input only
    assert "Read-only file system" in r.stderr
    assert Path(got["d"], "a.txt").read_bytes() == b"A" and not Path(got["d"], "new").exists()
    readonly.remove(cache)  # the frozen tree can still be evicted
    assert not cache.exists()



def test_a_long_name_past_the_bound_is_refused_before_it_is_read_into_memory(tmp_path):
    snap = tmp_path / "long.tar.gz"
    with tarfile.open(snap, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        tar.addfile(tarfile.TarInfo("a" * (2 << 20)))  # compresses to a few KiB; read whole by tarfile
    (tmp_path / "work").mkdir()
    with pytest.raises(SetupError, match="a long name of 2,097,153 bytes"), open(snap, "rb") as f:
        safe_extract(f, tmp_path / "work")


def test_an_accounts_command_gets_a_dev_shm_of_its_own_but_a_gangs_replicas_keep_the_nodes():
    from types import SimpleNamespace

    from trainyard.launch.readonly import own_shm

    account = {"uid": 65534, "gid": 65534, "name": "nobody"}
    cfg = lambda run_as, replicas, limit=None, **env: SimpleNamespace(  # noqa: E731
        run_as=run_as, replicas=replicas, memory_limit=limit, env=env)
    assert own_shm(cfg(account, 1, 64 << 20)) == 64 << 20 and own_shm(cfg(account, 1)) == 0
    assert own_shm(cfg(None, 1, 64 << 20)) is None  # the server's own jobs
    # NCCL between two replicas on one node meets in /dev/shm; one replica's several processes share its own
    assert own_shm(cfg(account, 2)) is None
    # what decides is the server's count, not the job's own variables (which opted out of it before)
    assert own_shm(cfg(account, 1, WORLD_SIZE="2")) == 0 and own_shm(cfg(account, 1, WORLD_SIZE="x")) == 0
