"""Code snapshots: what ignore files leave out, and what a large or oversized one says."""

import io
import tarfile
import warnings

import pytest

from trainyard.sdk.ignore import pattern_for
from trainyard.sdk.snapshot import LargeSnapshot, pack


def names(folder) -> list[str]:
    blob, _ = pack(folder)
    return tarfile.open(fileobj=io.BytesIO(blob)).getnames()


def tree(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_gitignore_trainyardignore_nested_rules_and_the_builtin_list(tmp_path):
    tree(tmp_path, {
        ".gitignore": "data/\n*.log\n!keep.log\n", ".trainyardignore": "/model.pt\n",
        "train.py": "", "keep.log": "", "run.log": "", "data/x.csv": "", "model.pt": "", "sub/model.pt": "",
        "sub/.gitignore": "local/\n", "sub/local/a.txt": "", "local/b.txt": "",
        "__pycache__/m.pyc": "", ".git/HEAD": "", "pkg/mod.pyc": "",
    })
    assert sorted(names(tmp_path)) == sorted([
        ".gitignore", ".trainyardignore", "train.py", "keep.log", "sub/model.pt", "sub/.gitignore", "local/b.txt"])


def test_the_same_code_gives_the_same_digest_whatever_is_ignored_beside_it(tmp_path):
    tree(tmp_path, {".gitignore": "out/\n", "train.py": "print(1)\n"})
    first = pack(tmp_path)[1]
    tree(tmp_path, {"out/ckpt.bin": "weights"})
    assert pack(tmp_path)[1] == first


def test_a_large_snapshot_warns_with_its_largest_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINYARD_SNAPSHOT_WARN", "1Ki")
    tree(tmp_path, {"train.py": "x", "data/big.csv": "y" * 4096, "weights.ckpt": "z" * 2048})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pack(tmp_path)
    [w] = caught
    assert w.category is LargeSnapshot
    text = str(w.message)
    assert text.index("data/big.csv") < text.index("weights.ckpt")
    assert "leave out with: data/" in text and "leave out with: *.ckpt" in text and "train.py" not in text


def test_an_oversized_snapshot_is_refused_before_anything_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINYARD_SNAPSHOT_MAX", "1Mi")
    with open(tmp_path / "huge.bin", "wb") as f:
        f.truncate(2**40)  # a sparse terabyte: reading it would take hours
    with pytest.raises(ValueError, match=r"over the limit of 1Mi; largest files:\n  huge.bin .*\*\.bin"):
        pack(tmp_path)


def test_a_bad_limit_names_its_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINYARD_SNAPSHOT_MAX", "lots")
    with pytest.raises(ValueError, match="TRAINYARD_SNAPSHOT_MAX"):
        pack(tmp_path)


@pytest.mark.parametrize("rel, pattern", [("data/a/b.csv", "data/"), ("model.ckpt", "*.ckpt"), ("Makefile", "/Makefile")])
def test_the_suggested_pattern(rel, pattern):
    assert pattern_for(rel) == pattern


def test_other_trainyard_homes_and_python_environments_are_left_out_whatever_their_names(tmp_path):
    import subprocess
    import sys

    tree(tmp_path, {
        "train.py": "",
        ".yard/server.lock": "", ".yard/token": "server token", ".yard/secrets.key": "k", ".yard/trainyard.db": "",
        "old-home/token": "t", "old-home/secrets.key": "k",  # a home whose server never ran here: no lock
        "conda-env/conda-meta/history": "", "conda-env/lib/site.py": "",
        "notes/token": "a file of the project that happens to be named so", "notes/secrets.key.md": "",
    })
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True)

    assert sorted(names(tmp_path)) == ["notes/secrets.key.md", "notes/token", "train.py"]
