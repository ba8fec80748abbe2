"""bench/fsstate.py: a bench waits out the inodes a bench before it removed, only where the filesystem makes it pay."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

# loaded from its file: bench/ on sys.path would shadow top-level names (auth, storage, ui) for every test after
_spec = importlib.util.spec_from_file_location("fsstate", Path(__file__).resolve().parents[2] / "bench" / "fsstate.py")
fsstate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fsstate)


@pytest.fixture
def stamp(tmp_path, monkeypatch):
    monkeypatch.setattr(fsstate, "STAMP", tmp_path / "cache" / "last-removal")
    monkeypatch.setattr(fsstate, "WINDOW", 0.4)
    return fsstate.STAMP


def test_the_mount_is_the_longest_mount_point_above_the_path():
    assert fsstate._mount(Path("/proc/self"))[1] == "proc"
    assert fsstate._mount(Path("/"))[1] != "proc"


def test_removing_a_home_records_when_and_how_many_entries(stamp, tmp_path):
    home = tmp_path / "home"
    (home / "a" / "b").mkdir(parents=True)
    (home / "a" / "f").write_text("x")
    before = time.time()
    fsstate.removed(home)
    assert not home.exists()
    when, count = stamp.read_text().split()
    # written to the millisecond, so it may round up past the clock read just after
    assert before - 0.001 <= float(when) <= time.time() + 0.001 and count == "3"  # a, a/b and a/f


def test_a_large_recent_removal_is_waited_out_on_a_journalless_ext4(stamp, tmp_path, monkeypatch):
    monkeypatch.setattr(fsstate, "journalless_ext4", lambda path: True)
    stamp.parent.mkdir(parents=True)
    stamp.write_text(f"{time.time():.3f} {fsstate.MANY}\n")
    t0 = time.monotonic()
    waited = fsstate.settle(tmp_path)
    assert 0.2 < waited <= 0.4 and time.monotonic() - t0 >= waited


@pytest.mark.parametrize("count, journalless, age", [
    (fsstate.MANY - 1, True, 0.0),  # a small removal costs the next run too little to wait for
    (fsstate.MANY, False, 0.0),  # a journal, XFS or tmpfs: nothing to wait for
    (fsstate.MANY, True, 1.0),  # older than the window
])
def test_no_wait_otherwise(stamp, tmp_path, monkeypatch, count, journalless, age):
    monkeypatch.setattr(fsstate, "journalless_ext4", lambda path: journalless)
    stamp.parent.mkdir(parents=True)
    stamp.write_text(f"{time.time() - age:.3f} {count}\n")
    assert fsstate.settle(tmp_path) == 0.0


def test_no_stamp_or_an_unreadable_one_waits_for_nothing(stamp, tmp_path, monkeypatch):
    monkeypatch.setattr(fsstate, "journalless_ext4", lambda path: True)
    assert fsstate.settle(tmp_path) == 0.0
    stamp.parent.mkdir(parents=True)
    stamp.write_text("not a time\n")
    assert fsstate.settle(tmp_path) == 0.0
