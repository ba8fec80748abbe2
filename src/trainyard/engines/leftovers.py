"""Removing what ended attempts leave on a node: an attempt's folder (``attempts/<attempt id>``: its replicas'
work dirs, logs and outputs as written) and a job's checkpoint folder (``checkpoints/<job id>``).

Run where the folders are: by the local engine in the server, by a Ray node's agent on its node. Only those two
folders under the node's root, named by an id, are ever removed; ``shutil.rmtree`` unlinks the links a job may
have left in its work dir without following them. Files a job's account or a container wrote are made writable
before a second try; what still cannot go is counted, not raised: the sweep goes on with the rest.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Iterable, NamedTuple

log = logging.getLogger(__name__)
FOLDERS = {"attempt": "attempts", "checkpoints": "checkpoints"}
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")  # job and attempt ids, and nothing that climbs out


class Leftover(NamedTuple):
    """One folder on one node: ``kind`` "attempt" (``name`` an attempt id) or "checkpoints" (a job id)."""

    node: str
    kind: str
    name: str


def path_of(root: Path, kind: str, name: str) -> Path:
    """The folder under ``root``; ValueError for any other kind or a name that is no id."""
    if kind not in FOLDERS or not ID.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"not a leftover: {kind} {name!r}")
    return root / FOLDERS[kind] / name


def remove(root: Path, items: Iterable[tuple[str, str]]) -> tuple[int, int]:
    """Remove each (kind, name) folder under ``root``; (removed, failed). One already gone counts as neither."""
    removed = failed = 0
    for kind, name in items:
        try:
            path = path_of(root, kind, name)
        except ValueError as e:
            log.warning("%s", e)
            failed += 1
            continue
        if path.is_symlink():  # never ours: a link where our folder should be is removed, not followed
            path.unlink(missing_ok=True)
            removed += 1
            continue
        if not path.exists():
            continue
        shutil.rmtree(path, onerror=_writable_and_again)
        if path.exists():
            log.warning("could not remove all of %s", path)
            failed += 1
        else:
            removed += 1
    return removed, failed


def _writable_and_again(func, path: str, _exc) -> None:  # noqa: ANN001
    """A read-only folder (``chmod -w`` by the job) keeps its entries: open it up and try once more."""
    try:
        parent = os.path.dirname(path)
        os.chmod(parent, os.stat(parent).st_mode | stat.S_IRWXU)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, os.stat(path).st_mode | stat.S_IRWXU)
        func(path)
    except OSError:
        pass
