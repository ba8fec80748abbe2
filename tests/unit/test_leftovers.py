"""Removing ended attempts' folders: only ours, by id, links unlinked and never followed, read-only folders too."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from trainyard.engines.leftovers import path_of, remove


def make(root, kind, name, files=("work/x.py",)):
    base = root / kind / name
    for f in files:
        (base / f).parent.mkdir(parents=True, exist_ok=True)
        (base / f).write_text("x")
    return base


def test_an_attempt_keeps_only_its_records_and_a_jobs_checkpoints_go(tmp_path):
    a = make(tmp_path, "attempts", "j-1-1", ("r0/work/model.bin", "r0/outputs/model.bin", "r0/venv/bin/python",
                                             "r0/launch.json", "r0/output.log", "r0/metrics.jsonl", "r0/result.json",
                                             "r0/launcher.log", "r1/work/x", "r1/output.log"))
    c = make(tmp_path, "checkpoints", "j-1", ("step.pt",))
    other = make(tmp_path, "attempts", "j-2-1")
    assert remove(tmp_path, [("attempt", "j-1-1"), ("checkpoints", "j-1"), ("attempt", "gone-1")]) == (2, 0)
    assert sorted(str(p.relative_to(a)) for p in a.rglob("*")) == [
        "r0", "r0/launcher.log", "r0/metrics.jsonl", "r0/output.log", "r0/result.json", "r1", "r1/output.log"]
    assert not c.exists() and (other / "work" / "x.py").exists()
    assert remove(tmp_path, [("attempt", "j-1-1"), ("checkpoints", "j-1")]) == (0, 0)  # nothing left to remove


def test_a_deleted_jobs_attempt_goes_records_and_all(tmp_path):
    a = make(tmp_path, "attempts", "j-1-1", ("r0/work/x", "r0/output.log", "r0/result.json", "r1/metrics.jsonl"))
    other = make(tmp_path, "attempts", "j-2-1", ("r0/output.log",))
    assert remove(tmp_path, [("deleted", "j-1-1")]) == (1, 0)
    assert not a.exists() and (other / "r0" / "output.log").exists()
    assert remove(tmp_path, [("deleted", "j-1-1")]) == (0, 0)
    with pytest.raises(ValueError):
        path_of(tmp_path, "deleted", "../j-2-1")


@pytest.mark.parametrize("kind,name", [("attempt", ".."), ("attempt", "../j-2-1"), ("attempt", "a/b"),
                                       ("venvs", "py3"), ("checkpoints", ""), ("attempt", "-rf")])
def test_a_name_that_is_no_id_or_a_kind_that_is_not_ours_is_refused(tmp_path, kind, name):
    with pytest.raises(ValueError):
        path_of(tmp_path, kind, name)
    make(tmp_path, "attempts", "j-2-1")
    assert remove(tmp_path, [(kind, name)]) == (0, 1)
    assert (tmp_path / "attempts" / "j-2-1" / "work" / "x.py").exists()


def test_links_a_job_left_are_unlinked_not_followed(tmp_path):
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data.csv").write_text("keep me")
    a = make(tmp_path, "attempts", "j-1-1", ("r0/work/x.py",))
    os.symlink(outside, a / "r0" / "work" / "data")  # a job's link to a shared dataset
    os.symlink(outside, a / "r0" / "outputs")  # and one where a folder of ours should be
    os.symlink(outside, tmp_path / "attempts" / "j-3-1")  # a link where our folder should be
    assert remove(tmp_path, [("attempt", "j-1-1"), ("attempt", "j-3-1")]) == (2, 0)
    assert (outside / "data.csv").read_text() == "keep me" and list(a.rglob("*")) == [a / "r0"]
    assert not os.path.lexists(tmp_path / "attempts" / "j-3-1")


NOBODY = 65534


def test_a_folder_the_job_made_read_only_goes_too(tmp_path):
    # as a server that is not root: here a child process that drops to nobody (root writes anywhere)
    if os.geteuid() != 0:
        uid, home = os.geteuid(), tmp_path
    else:
        uid, home = NOBODY, Path(tempfile.mkdtemp(dir="/tmp"))
        os.chmod(home, 0o755)
    a = make(home, "attempts", "j-1-1", ("r0/work/ro/f.txt",))
    for d, _, files in os.walk(home):
        os.chown(d, uid, -1)
        for f in files:
            os.chown(os.path.join(d, f), uid, -1)
    os.chmod(a / "r0" / "work" / "ro", 0o500)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: as that user, remove, say what happened
        try:
            if os.geteuid() == 0:
                os.setuid(uid)
            os.write(w, repr(remove(home, [("attempt", "j-1-1")])).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    try:
        assert os.read(r, 100).decode() == "(1, 0)"
        assert not (a / "r0" / "work").exists()
    finally:
        if home != tmp_path:
            shutil.rmtree(home, ignore_errors=True)
