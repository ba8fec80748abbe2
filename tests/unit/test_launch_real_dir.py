"""The launcher names its attempt dir as the kernel does (files.real_dir), as Path.resolve() would."""

from __future__ import annotations

import os

from trainyard.launch.files import real_dir


def test_a_folder_through_a_link_and_dots_is_named_as_resolve_names_it(tmp_path):
    (tmp_path / "real" / "attempt").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    through = tmp_path / "link" / "attempt" / ".." / "attempt"
    assert real_dir(through) == through.resolve() == (tmp_path / "real" / "attempt").resolve()
    assert real_dir(str(through)) == through.resolve()


def test_a_relative_folder_is_made_absolute(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path)
    assert real_dir("a") == (tmp_path / "a").resolve()
    assert real_dir("a").is_absolute()


def test_a_missing_folder_or_a_file_is_left_to_resolve(tmp_path):
    missing = tmp_path / "none" / "attempt"
    assert real_dir(missing) == missing.resolve()
    (tmp_path / "f").write_text("")
    assert real_dir(tmp_path / "f") == (tmp_path / "f").resolve()
    assert not os.path.exists(missing)
