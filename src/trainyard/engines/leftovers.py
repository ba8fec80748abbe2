"""Removing what ended attempts leave on a node: the bulk of an attempt's folder (``attempts/<attempt id>``; all
of it once its job is deleted) and a job's checkpoint folder (``checkpoints/<job id>``).

Of each replica folder of an attempt, only its records stay: ``output.log`` (on a folder artifact store the one
whole copy of a log past the server's ``log_keep``), ``metrics.jsonl`` (every point, where the server keeps a
thinned series), ``result.json`` and ``launcher.log``. The work dir (what the job wrote there), the outputs as
written (uploaded when the attempt ended), the attempt's own virtualenv and staging folders, and ``launch.json``
go. Run where the folders are: by the local engine in the server, by a Ray node's agent on its node. Only those
two folders under the node's root, named by an id, are ever touched; ``shutil.rmtree`` unlinks the links a job
may have left without following them. Files a job's account or a container wrote are made writable before a
second try; what still cannot go is counted, not raised: the sweep goes on with the rest.
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
# "deleted": an attempt of a deleted job, records and all
FOLDERS = {"attempt": "attempts", "checkpoints": "checkpoints", "deleted": "attempts"}
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")  # job and attempt ids, and nothing that climbs out


class Leftover(NamedTuple):
    """One folder on one node: ``kind`` "attempt" or "deleted" (``name`` an attempt id) or "checkpoints" (a job
    id)."""

    node: str
    kind: str
    name: str


def path_of(root: Path, kind: str, name: str) -> Path:
    """The folder under ``root``; ValueError for any other kind or a name that is no id."""
    if kind not in FOLDERS or not ID.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"not a leftover: {kind} {name!r}")
    return root / FOLDERS[kind] / name


KEPT = frozenset({"output.log", "metrics.jsonl", "result.json", "launcher.log"})  # a replica folder's records


def remove(root: Path, items: Iterable[tuple[str, str]]) -> tuple[int, int]:
    """Remove each (kind, name) under ``root``: a job's checkpoint folder, all but the records of an attempt's
    replica folders, or all of a deleted job's attempt folder; (removed, failed). One with nothing left to
    remove counts as neither."""
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
        if not path.is_dir():
            continue
        doomed = _bulk(path) if kind == "attempt" else [path]
        if not doomed:
            continue
        for p in doomed:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, onerror=_writable_and_again)
            else:
                try:
                    p.unlink(missing_ok=True)
                except OSError:
                    pass
        if any(os.path.lexists(p) for p in doomed):
            log.warning("could not remove all of %s", path)
            failed += 1
        else:
            removed += 1
    return removed, failed


def _bulk(attempt: Path) -> list[Path]:
    """What goes of an attempt's folder: every entry of its replica folders but the records."""
    out = []
    for replica in attempt.iterdir():
        if replica.is_dir() and not replica.is_symlink():
            out += [e for e in replica.iterdir() if e.name not in KEPT]
        else:
            out.append(replica)  # nothing of ours is a file or link here
    return out


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
