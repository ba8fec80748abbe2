"""Checkpoints on an object store: ``TRAINYARD_CHECKPOINT_DIR`` uploaded as whole sets, restored before an attempt.

A *set* is the files of the folder at one moment. Its files go to content-addressed
keys (``<url>/blobs/sha256-<hex>``) that are never overwritten, and only then is
``<url>/manifest.json`` (path -> size and digest) written, in one PUT. A restore
reads the manifest and nothing else names what to fetch, so a set cut off halfway
is never restored, and the previous complete set stays valid until the new
manifest lands (its blobs are removed only after that).

A set is captured by hard links into a folder of the launcher's own: a job that
writes each file aside and renames it into place (the contract, see
docs/CHECKPOINTS.md) can go on writing while the captured set goes up, because
a rename replaces the name, never the bytes of the linked file. Files named
``*.tmp`` or ``*.part`` are being written: they are left out.

Imports fsspec (through :mod:`trainyard.artifacts.transfer`) only when used: the
launcher loads this module only when the attempt has a checkpoint URL.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

from trainyard.artifacts import transfer
from trainyard.launch.files import file_lock

MANIFEST = "manifest.json"
SKIPPED_SUFFIXES = (".tmp", ".part")


class CheckpointError(Exception):
    """A checkpoint set could not be uploaded or restored; the message names the key."""


class Store:
    """The checkpoint sets of one job at ``url`` (an fsspec folder URL)."""

    def __init__(self, url: str, storage: dict | None = None) -> None:
        self.url = url.rstrip("/")
        self.fs, root = transfer.open_fs(self.url, storage)
        self.root = root.rstrip("/")

    def _key(self, name: str) -> str:
        return f"{self.root}/{name}"

    def blob_name(self, digest: str) -> str:
        return "blobs/" + digest.replace(":", "-")

    # -- reading -------------------------------------------------------------------

    def manifest(self) -> dict | None:
        """The last complete set (``{"files": {path: {"size", "digest"}}, ...}``), or None if there is none."""
        key = self._key(MANIFEST)
        try:
            raw = self.fs.cat_file(key)
        except FileNotFoundError:
            return None
        except Exception as e:  # botocore, aiohttp, OS errors: the store is unusable, say which key
            raise CheckpointError(f"cannot read checkpoint manifest {self.url}/{MANIFEST}: {_plain(e)}") from None
        try:
            manifest = json.loads(raw)
            files = manifest["files"]
            for path, entry in files.items():
                _confined(path)
                int(entry["size"]), str(entry["digest"])
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"checkpoint manifest {self.url}/{MANIFEST} is corrupt: {e}") from None
        return manifest

    def restore(self, folder: Path, attempt_id: str | None = None) -> dict | None:
        """Make ``folder`` hold exactly the last complete set; that set's manifest, or None (left as it is).

        Files already there with the recorded size and digest are kept; the others are
        fetched beside their name, checked and renamed into place; files the set does
        not name are removed (what a job wrote after its last complete set is not consistent).

        Replicas of one attempt on one node share the folder (local engine): the first to get
        here restores it for ``attempt_id``, the others leave it to the job that may already write."""
        manifest = self.manifest()
        if manifest is None:
            return None
        folder.mkdir(parents=True, exist_ok=True)
        done = folder.parent / f".{folder.name}.restored"
        with file_lock(folder.parent / f".{folder.name}.restore.lock"):
            if attempt_id is not None and done.exists() and done.read_text() == attempt_id:
                return manifest
            self._mirror(manifest["files"], folder)
            if attempt_id is not None:
                done.write_text(attempt_id)
        return manifest

    def _mirror(self, files: dict[str, dict], folder: Path) -> None:
        for path, entry in files.items():
            target = folder / path
            _unlink_links(folder, target)
            if target.is_file() and target.stat().st_size == entry["size"] and \
                    transfer.file_digest(target) == entry["digest"]:
                continue
            self._fetch(entry, target)
        for root, dirs, names in os.walk(folder, topdown=False):
            for name in names:
                local = Path(root) / name
                if local.relative_to(folder).as_posix() not in files:
                    local.unlink()
            for name in dirs:
                try:
                    (Path(root) / name).rmdir()  # only when empty
                except OSError:
                    pass

    def _fetch(self, entry: dict, target: Path) -> None:
        name = self.blob_name(entry["digest"])
        where = f"{self.url}/{name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.restore.part")
        try:
            with open(tmp, "wb") as f:
                for chunk in transfer.read_checked(self.fs, self._key(name), entry["size"], entry["digest"]):
                    f.write(chunk)
            os.replace(tmp, target)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint object {where} is missing") from None
        except transfer.Corrupt as e:
            raise CheckpointError(f"checkpoint object {where} is corrupt: {e}") from None
        except Exception as e:  # OS errors, and what botocore raises unwrapped (a refused connection)
            raise CheckpointError(f"cannot read checkpoint object {where}: {_plain(e)}") from None
        finally:
            tmp.unlink(missing_ok=True)

    # -- writing -------------------------------------------------------------------

    def upload(self, staged: Path, files: dict[str, dict], attempt: int, previous: dict | None) -> None:
        """Upload the captured set in ``staged`` (``files``: its manifest entries), then its manifest;
        then remove the blobs of ``previous`` that the new set no longer names."""
        known = {e["digest"] for e in (previous or {}).get("files", {}).values()}
        for path, entry in files.items():
            name = self.blob_name(entry["digest"])
            try:
                if entry["digest"] in known or self.fs.exists(self._key(name)):
                    continue  # content-addressed: the same bytes are there already
                transfer.put_file(self.fs, staged / path, self._key(name))
            except Exception as e:
                raise CheckpointError(f"cannot upload checkpoint object {self.url}/{name}: {_plain(e)}") from None
        body = json.dumps({"attempt": attempt, "time": time.time(), "files": files}, indent=1).encode()
        try:
            transfer.write_stream(self.fs, self._key(MANIFEST), [body])
        except Exception as e:
            raise CheckpointError(f"cannot write checkpoint manifest {self.url}/{MANIFEST}: {_plain(e)}") from None
        keep = {e["digest"] for e in files.values()}
        for digest in known - keep:
            try:
                self.fs.rm_file(self._key(self.blob_name(digest)))
            except Exception:  # an orphaned blob costs space, not correctness
                pass


def capture(folder: Path, stage: Path) -> list[str]:
    """Hard-link (copy where links fail: another filesystem) every regular file of ``folder``
    into the empty folder ``stage``; their paths, relative to both. Quick: nothing is read.

    The folder is the job's (its account's, when it runs as one) and this launcher may be root: the walk holds each
    folder open (``os.fwalk``), and a file is linked as the name is now (``linkat`` without following), then kept
    only if what was linked is a regular file. A name the job swaps for a link meanwhile is linked as that link and
    dropped, never followed to a file of root's."""
    paths: list[str] = []
    if folder.is_symlink() or not folder.is_dir():
        return paths
    for root, dirs, names, fd in os.fwalk(folder, follow_symlinks=False):
        dirs.sort()
        here = os.path.relpath(root, folder)
        for name in sorted(names):
            if name.endswith(SKIPPED_SUFFIXES):
                continue
            rel = name if here == "." else f"{here}/{name}"
            dst = stage / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(name, dst, src_dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # renamed away meanwhile: the new name is listed or not, either way consistent
            except OSError:
                if not _copy_plain(fd, name, dst):
                    continue
            if not stat.S_ISREG(os.lstat(dst).st_mode):  # a link or a fifo, linked as itself
                os.unlink(dst)
                continue
            paths.append(rel)
    return paths


def _copy_plain(dir_fd: int, name: str, dst: Path) -> bool:
    """Copy ``name`` (in the folder ``dir_fd``) to ``dst`` if it is a regular file, read from what was opened."""
    try:
        src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return False
    with open(src, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return False
        with open(dst, "wb") as out:
            shutil.copyfileobj(f, out)
    return True


def describe(stage: Path, paths: list[str]) -> dict[str, dict]:
    """The manifest entries of a captured set: each file's size and digest, read from the links."""
    return {rel: {"size": (stage / rel).stat().st_size, "digest": transfer.file_digest(stage / rel)}
            for rel in paths}


def _unlink_links(folder: Path, target: Path) -> None:
    """Remove links on the way from ``folder`` to ``target`` (and ``target`` itself, if a link): the
    launcher may be root, and a link the job left must not lead a restore out of its folder."""
    here = folder
    for part in target.relative_to(folder).parts:
        here = here / part
        if here.is_symlink():
            here.unlink()
            return
        if not here.exists():
            return


def _confined(path: str) -> None:
    parts = path.split("/")
    if not path or path.startswith("/") or ".." in parts or "" in parts or "." in parts:
        raise ValueError(f"unsafe path {path!r}")


def _plain(e: BaseException) -> str:
    text = str(e).strip() or e.__class__.__name__
    return text if len(text) > 20 else f"{e.__class__.__name__}: {text}"
