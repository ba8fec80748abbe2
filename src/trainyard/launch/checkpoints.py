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

import errno
import json
import os
import shutil
import stat
import time
from pathlib import Path

from trainyard.artifacts import transfer
from trainyard.launch.files import file_lock, open_folder, walk_held

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
        """``folder`` made to hold ``files``. It is the job's (its account's, when it runs as one) from an earlier
        attempt and this launcher may be root: every step goes through folders held open and never follows a link
        (a link or a file where a folder goes is the job's, and removed), so nothing the account swaps in while
        this runs leads a write or a removal outside the folder."""
        top = open_folder(folder)
        try:
            for path, entry in files.items():
                *parents, name = path.split("/")
                parent = _open_folders(top, parents)
                try:
                    if not _holds(parent, name, entry):
                        self._fetch(entry, parent, name)
                finally:
                    os.close(parent)
            for root, dirs, names, fd in walk_held(top, topdown=False):
                for name in names:  # links among them: unlink removes the link
                    if os.path.normpath(os.path.join(root, name)) not in files:
                        os.unlink(name, dir_fd=fd)
                for name in dirs:
                    try:
                        os.rmdir(name, dir_fd=fd)  # only when empty
                    except OSError:
                        pass
        finally:
            os.close(top)

    def _fetch(self, entry: dict, parent: int, name: str) -> None:
        blob = self.blob_name(entry["digest"])
        where = f"{self.url}/{blob}"
        tmp = f".{name}.restore.part"
        try:
            _unlink(tmp, parent)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=parent)
            with open(fd, "wb") as f:
                for chunk in transfer.read_checked(self.fs, self._key(blob), entry["size"], entry["digest"]):
                    f.write(chunk)
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint object {where} is missing") from None
        except transfer.Corrupt as e:
            raise CheckpointError(f"checkpoint object {where} is corrupt: {e}") from None
        except Exception as e:  # OS errors, and what botocore raises unwrapped (a refused connection)
            raise CheckpointError(f"cannot read checkpoint object {where}: {_plain(e)}") from None
        finally:
            _unlink(tmp, parent)

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
                transfer.put_named(self.fs, staged / path, self._key(name), entry["digest"])
            except transfer.Corrupt as e:  # the job wrote the file in place: this set is not one whole moment
                raise CheckpointError(f"checkpoint file {path} was written in place while its set went up (write "
                                      f"it aside, then rename it: docs/CHECKPOINTS.md); set not kept: {e}") from None
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
    folder open (``files.walk_held``), and a file is linked as the name is now (``linkat`` without following), then kept
    only if what was linked is a regular file. A name the job swaps for a link meanwhile is linked as that link and
    dropped, never followed to a file of root's."""
    paths: list[str] = []
    try:
        top = open_folder(folder)
    except OSError:
        return paths
    try:
        _capture(top, stage, paths)
    finally:
        os.close(top)
    return paths


def _capture(top: int, stage: Path, paths: list[str]) -> None:
    for here, dirs, names, fd in walk_held(top):
        dirs.sort()
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


def _copy_plain(dir_fd: int, name: str, dst: Path) -> bool:
    """Copy ``name`` (in the folder ``dir_fd``) to ``dst`` if it is a regular file, read from what was opened."""
    f = _open_plain(dir_fd, name)
    if f is None:
        return False
    with f, open(dst, "wb") as out:
        shutil.copyfileobj(f, out)
    return True


def _open_plain(dir_fd: int, name: str):  # noqa: ANN202
    """``name`` in the folder ``dir_fd`` opened for reading if it is a regular file (never through a link), or None."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    f = open(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        return None
    return f


def describe(stage: Path, paths: list[str]) -> dict[str, dict]:
    """The manifest entries of a captured set: each file's size and digest, read from the links."""
    return {rel: {"size": (stage / rel).stat().st_size, "digest": transfer.file_digest(stage / rel)}
            for rel in paths}


def _open_folders(top: int, parts: list[str]) -> int:
    """The folder ``top/parts…``, opened (the caller closes it): each step opened without following a link, made
    where missing, and where a link or a file stands in its place (the job's), that removed first."""
    here = os.dup(top)
    try:
        for part in parts:
            try:
                there = open_folder(part, dir_fd=here)
            except OSError as e:
                if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    raise
                if e.errno != errno.ENOENT:
                    os.unlink(part, dir_fd=here)
                os.mkdir(part, dir_fd=here)
                there = open_folder(part, dir_fd=here)
            os.close(here)
            here = there
    except BaseException:
        os.close(here)
        raise
    return here


def _holds(parent: int, name: str, entry: dict) -> bool:
    """Whether ``name`` in the folder ``parent`` is a regular file with the entry's size and digest."""
    f = _open_plain(parent, name)
    if f is None:
        return False
    with f:
        return os.fstat(f.fileno()).st_size == entry["size"] and transfer.stream_digest(f) == entry["digest"]


def _unlink(name: str, parent: int) -> None:
    try:
        os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        pass


def _confined(path: str) -> None:
    parts = path.split("/")
    if not path or path.startswith("/") or ".." in parts or "" in parts or "." in parts:
        raise ValueError(f"unsafe path {path!r}")


def _plain(e: BaseException) -> str:
    text = str(e).strip() or e.__class__.__name__
    return text if len(text) > 20 else f"{e.__class__.__name__}: {text}"
