"""The virtualenv cache key: same content on the same Python, same venv."""

from __future__ import annotations

from trainyard.launch.pyenv import venv_key


def test_key_ignores_order_blanks_and_comments(tmp_path):
    a = venv_key({"pip": ["numpy==1.26", "pandas"], "requirements": "x==1\n# note\n\ny\n"}, tmp_path)
    b = venv_key({"pip": ["pandas", " numpy==1.26"], "requirements": "y\nx==1"}, tmp_path)
    assert a == b


def test_key_changes_with_content(tmp_path):
    assert venv_key({"pip": ["a"]}, tmp_path) != venv_key({"pip": ["b"]}, tmp_path)
    assert venv_key({"pip": ["a"]}, tmp_path) != venv_key({"requirements": "a"}, tmp_path)


def test_local_package_content_is_part_of_the_key(tmp_path):
    pkg = tmp_path / "tinypkg"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text("[project]\nname='tinypkg'\n")
    env = {"pip": ["./tinypkg"]}
    first = venv_key(env, tmp_path)
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.pyc").write_bytes(b"junk")
    assert venv_key(env, tmp_path) == first  # build leftovers do not count
    (pkg / "mod.py").write_text("X = 1\n")
    assert venv_key(env, tmp_path) != first


def test_key_is_stable_across_work_dirs(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d / "pkg").mkdir(parents=True)
        (tmp_path / d / "pkg" / "setup.py").write_text("# same\n")
    env = {"pip": ["./pkg"]}
    assert venv_key(env, tmp_path / "a") == venv_key(env, tmp_path / "b")
