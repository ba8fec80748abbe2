"""launch.emptydirs: an attempt's folders taken from a pool made ahead, or made where it cannot be."""

from __future__ import annotations

import os

from trainyard.launch.emptydirs import FILE, KEEP, KEEP_FILES, POOL, Pool


def test_folders_are_taken_from_the_pool_then_made_and_the_pool_refilled(tmp_path):
    cache, attempt = tmp_path / "venvs", tmp_path / "attempt"
    attempt.mkdir()
    first = Pool(str(cache))
    assert first.wanted()
    first.make(attempt / "work")  # no pool yet: made
    assert (attempt / "work").is_dir() and first.taken == 0
    first.refill()
    ready = os.listdir(cache / POOL)
    assert len(ready) == KEEP + KEEP_FILES and sum(n.endswith(FILE) for n in ready) == KEEP_FILES
    second = Pool(str(cache))
    for name in ("a", "b"):
        second.make(attempt / name)
        assert (attempt / name).is_dir() and not any((attempt / name).iterdir())
    second.place_file(attempt / "output.log")
    assert (attempt / "output.log").is_file() and (attempt / "output.log").stat().st_size == 0
    assert second.taken == 3 and len(os.listdir(cache / POOL)) == KEEP + KEEP_FILES - 3
    second.refill()
    assert len(os.listdir(cache / POOL)) == KEEP + KEEP_FILES


def test_a_folder_there_already_is_left_as_it_is(tmp_path):
    cache, work = tmp_path / "venvs", tmp_path / "attempt" / "work"
    Pool(str(cache)).refill()
    work.mkdir(parents=True)
    (work / "kept").write_text("from the attempt before")
    (work / "log").write_text("written before")
    pool = Pool(str(cache))
    pool.make(work)
    pool.place_file(work / "log")
    assert (work / "kept").read_text() == "from the attempt before" and pool.taken == 0
    assert (work / "log").read_text() == "written before"


def test_a_missing_parent_is_made_as_mkdir_p_would(tmp_path):
    cache = tmp_path / "venvs"
    Pool(str(cache)).refill()
    pool = Pool(str(cache))
    pool.make(tmp_path / "checkpoints" / "job-1")
    assert (tmp_path / "checkpoints" / "job-1").is_dir() and pool.taken == 0


def test_no_venv_cache_means_no_pool(tmp_path):
    pool = Pool(None)
    pool.make(tmp_path / "work")
    pool.refill()
    assert (tmp_path / "work").is_dir() and not pool.wanted() and os.listdir(tmp_path) == ["work"]


def test_what_the_pool_did_not_make_is_never_taken(tmp_path):
    cache, attempt = tmp_path / "venvs", tmp_path / "attempt"
    attempt.mkdir()
    (cache / POOL / "full").mkdir(parents=True)
    (cache / POOL / "full" / "planted").write_text("x")
    (tmp_path / "elsewhere").mkdir()
    (cache / POOL / "link").symlink_to(tmp_path / "elsewhere")
    (cache / POOL / ("written" + FILE)).write_text("x")
    (tmp_path / "other.log").write_text("")
    os.link(tmp_path / "other.log", cache / POOL / ("shared" + FILE))
    pool = Pool(str(cache))
    pool.make(attempt / "work")
    pool.place_file(attempt / "output.log")
    assert pool.taken == 0 and not (attempt / "work").is_symlink() and not any((attempt / "work").iterdir())
    assert not (attempt / "output.log").exists()
    assert len(os.listdir(cache / POOL)) == 4  # all left where they were
