"""Which files of a work dir a code snapshot leaves out: ``.gitignore`` files (at any depth, as git
reads them), a ``.trainyardignore`` (same syntax), and a built-in list of what is never code."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from pathspec import GitIgnoreSpec

IGNORE_FILES = (".gitignore", ".trainyardignore")
BUILTIN = [".git/", "__pycache__/", ".venv/", "venv/", "node_modules/", ".mypy_cache/", ".pytest_cache/",
           ".ipynb_checkpoints/", ".tox/", "*.pyc", ".DS_Store"]


class Ignore:
    """The ignore rules of one folder tree. Rules of a nested ignore file apply under its folder only."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.specs: list[tuple[str, GitIgnoreSpec]] = [("", GitIgnoreSpec.from_lines(BUILTIN))]

    def enter(self, rel_dir: str) -> None:
        """Read the ignore files of ``rel_dir`` (relative to the root, "" for the root itself)."""
        for name in IGNORE_FILES:
            path = self.root / rel_dir / name
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            self.specs.append((f"{rel_dir}/" if rel_dir else "", GitIgnoreSpec.from_lines(lines)))

    def ignored(self, rel: str, is_dir: bool) -> bool:
        rel += "/" if is_dir else ""
        for prefix, spec in self.specs:
            if rel.startswith(prefix) and spec.match_file(rel[len(prefix):]):
                return True
        return False


def not_code(folder: str) -> bool:
    """Whether ``folder`` is a trainyard home (its lock, or its token with the key its secrets are sealed with:
    :mod:`trainyard.home`) or a Python environment (a virtualenv's ``pyvenv.cfg``, conda's ``conda-meta/``),
    whatever its name: a home's token and key must not travel with every job, nor an environment's packages."""
    def has(name: str) -> bool:
        return os.path.lexists(os.path.join(folder, name))

    return has("server.lock") or (has("secrets.key") and has("token")) or has("pyvenv.cfg") or has("conda-meta")


def walk(root: Path, leave_out: tuple[Path, ...] = ()) -> Iterator[tuple[str, Path]]:
    """``(path relative to root, path)`` of every regular file kept, in sorted order; links are skipped,
    and so are the folders ``leave_out`` (resolved paths: trainyard's own home, when it is in the code) and those
    :func:`not_code` finds (any other home, any virtualenv)."""
    rules = Ignore(root)
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        rules.enter(rel_dir)
        join = (lambda n: f"{rel_dir}/{n}") if rel_dir else (lambda n: n)
        dirnames[:] = sorted(d for d in dirnames
                             if not os.path.islink(os.path.join(dirpath, d)) and not rules.ignored(join(d), True)
                             and Path(dirpath, d).resolve() not in leave_out and not not_code(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file() or rules.ignored(join(name), False):
                continue
            yield join(name), path


def pattern_for(rel: str) -> str:
    """The ignore line that would leave ``rel`` out: its top folder, else its extension, else itself."""
    top, sep, _ = rel.partition("/")
    if sep:
        return f"{top}/"
    suffix = Path(rel).suffix
    return f"*{suffix}" if suffix else f"/{rel}"
