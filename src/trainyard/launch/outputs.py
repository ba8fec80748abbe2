"""Uploading an attempt's outputs when it is over.

What goes: everything under ``ATTEMPT_DIR/outputs`` (``TRAINYARD_OUTPUT_DIR``),
plus files of the work dir matching the spec's ``outputs`` globs, each at its
path relative to the folder it came from. Where it goes: ``output_url``
(a local folder or ``file://`` is a plain copy; any other URL goes through
fsspec, verified and never half-visible: :mod:`trainyard.artifacts.transfer`).
Each file is recorded as ``{"path", "size", "digest": "sha256:<hex>"}``.

A file goes once, under one name (its other names, hard links or links to it,
are left out and said so), and what goes is bounded as a whole (the server's
``outputs_max``, checked by :func:`over_bound` before anything is sent): a
name costs a job nothing, nor does a sparse file's size, while each upload is
a whole copy in the store.

An upload error is reported in the message, never raised: the attempt's
result matters more than any one file.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from trainyard.artifact_paths import is_artifact_path
from trainyard.launch.files import local_path

BLOCK = 1 << 20


def collect(outputs_dir: Path, work: Path, globs: list[str]) -> tuple[dict[str, Path], list[str]]:
    """Relative posix path -> local file, and complaints (bad globs, links and further names left out).

    The outputs folder wins when both places have a file at the same path. A file found under several names
    (hard links, links to it) is taken under each (a pipeline's declared outputs may be names of one file): each
    is a whole copy in the store, and counts whole against the bound (:func:`over_bound`).
    Links are never followed out of the job: folder links are not walked into,
    and a file link is taken only when its target is a file inside the folder
    it was found in (the outputs folder, or the work dir for globs). A job in a
    container could otherwise point one at a file of the host, which the
    launcher (outside) would upload.
    """
    files: dict[str, Path] = {}
    problems: list[str] = []
    if outputs_dir.is_symlink():
        problems.append(f"output folder {outputs_dir.name!r} is a link: not followed, nothing uploaded from it")
    elif outputs_dir.is_dir():
        for p in _walk(outputs_dir, outputs_dir.resolve(), problems, outputs_dir):
            files[p.relative_to(outputs_dir).as_posix()] = p
    if work.is_symlink():
        problems.append(f"work dir {work.name!r} is a link: not followed, output globs skipped")
        return _resolved(files), problems
    root = work.resolve()
    for pattern in globs:
        if os.path.isabs(pattern) or ".." in Path(pattern).parts:
            problems.append(f"output glob {pattern!r} must stay inside the work dir")
            continue
        try:
            matches = sorted(work.glob(pattern))
        except ValueError as e:
            problems.append(f"output glob {pattern!r}: {e}")
            continue
        said = set()
        for match in matches:
            if (link := _through_link(match, work)) is not None:
                # said once, by the link's name: what the launcher (maybe root) saw behind it is not the job's to read
                if link not in said:
                    said.add(link)
                    problems.append(f"output glob {pattern!r} skipped under {link!r}: a link is not followed")
                continue
            found = _walk(match, root, problems, work) if _real_dir(match) else [match]
            for p in found:
                if p is match and not _safe_file(p, root, problems, work):
                    continue
                files.setdefault(p.relative_to(work).as_posix(), p)
    for rel in [r for r in files if not is_artifact_path(r)]:  # the server would refuse the whole report
        problems.append(f"output {rel!r} skipped: a path with a backslash cannot be an output")
        del files[rel]
    return _resolved(files), problems


def _resolved(found: dict[str, Path]) -> dict[str, Path]:
    """``found`` (names as found, links among them) as real paths: a link's upload opens its target."""
    return {rel: p.resolve() for rel, p in found.items()}


def over_bound(files: dict[str, Path], limit: int | None) -> str | None:
    """Why ``files`` (from :func:`collect`) may not be uploaded: more bytes in all than ``limit`` (the server's
    ``outputs_max``; None or 0: no bound). Sizes as the store would hold them: a sparse file counts whole, and a
    file under several names once per name (each is a copy), so a job's links cannot fill the store for free."""
    if not limit:
        return None
    total = 0
    for p in files.values():
        try:
            total += p.stat().st_size
        except OSError:
            pass
    if total <= limit:
        return None
    return (f"outputs not uploaded: {len(files)} files of {_gib(total)} in all, over this server's bound of "
            f"{_gib(limit)} per replica (outputs_max); write less to $TRAINYARD_OUTPUT_DIR and the output globs")


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


def _real_dir(p: Path) -> bool:
    return p.is_dir() and not p.is_symlink()


def _through_link(p: Path, top: Path) -> str | None:
    """The first folder between ``top`` and ``p`` that is a link (glob patterns walk through them), if any."""
    for parent in reversed(p.relative_to(top).parents):
        if parent != Path(".") and (top / parent).is_symlink():
            return parent.as_posix()
    return None


def _walk(folder: Path, root: Path, problems: list[str], shown_from: Path) -> list[Path]:
    """Files under ``folder`` (which is no link), without following folder links."""
    found = []
    for here, dirs, names in os.walk(folder, followlinks=False):
        base = Path(here)
        for d in sorted(dirs):
            if (base / d).is_symlink():  # os.walk lists links to folders among the folders
                rel = (base / d).relative_to(shown_from).as_posix()
                problems.append(f"output {rel!r} skipped: a link to a folder is not followed")
        dirs[:] = sorted(d for d in dirs if not (base / d).is_symlink())
        for name in sorted(names):
            p = base / name
            if _safe_file(p, root, problems, shown_from):
                found.append(p)
    return found


def _safe_file(p: Path, root: Path, problems: list[str], shown_from: Path) -> bool:
    """A regular file, or a link to one inside ``root``; a link elsewhere is noted and refused."""
    if not p.is_symlink():
        return p.is_file()
    target = p.resolve()
    if target.is_relative_to(root) and target.is_file():
        return True
    problems.append(f"output {p.relative_to(shown_from).as_posix()!r} skipped: a link out of the job's folder, or "
                    "not to a file")
    return False


def _open_checked(src: Path, roots: tuple[Path, ...]) -> int:
    """``src`` (a file's real path, as :func:`collect` found it) opened for reading, only if what was opened is a
    file inside one of ``roots`` (the job's folders, real paths): the job may swap it, or a folder on its way, for a
    link between the look and the upload, which this process (maybe root) would otherwise follow to a file the job
    may not read (another job of its account can swap it)."""
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)  # NONBLOCK: a FIFO swapped in
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{src.name} is no longer a file")
        opened = Path(os.readlink(f"/proc/self/fd/{fd}"))  # where the file opened is, whatever path led to it
        if opened != src or not any(opened.is_relative_to(root) for root in roots):
            raise OSError(f"{src.name} was moved or reached through a new link since it was found")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _copy_hashing(fd: int, dst, size: int) -> str:  # noqa: ANN001
    """Copy the first ``size`` bytes (its size when opened: what is recorded and counted against the bound,
    however it grows since) of the open file ``fd`` into the open file ``dst`` (or just read them when None);
    their sha256."""
    h = hashlib.sha256()
    with os.fdopen(os.dup(fd), "rb") as f:
        while size > 0 and (block := f.read(min(BLOCK, size))):
            size -= len(block)
            h.update(block)
            if dst is not None:
                dst.write(block)
    return h.hexdigest()


def upload(files: dict[str, Path], output_url: str | None, roots: tuple[Path, ...],
           limit: int | None = None) -> tuple[list[dict], list[str]]:
    """Send ``files`` (found by :func:`collect` in the folders ``roots``) to ``output_url``; the records of those
    that made it, and errors.

    With no ``output_url`` nothing is copied, but the files are still listed. No more than ``limit`` bytes go in
    all (None or 0: no bound), counted as each is opened: another process of the job's account may have added
    bytes since :func:`collect` and :func:`over_bound` looked.
    """
    roots = tuple(Path(os.path.realpath(r)) for r in roots)
    records, errors = [], []
    left = limit or None
    dest = local_path(output_url) if output_url else None
    fs = remote = None
    if output_url and dest is None:
        try:
            import fsspec

            fs, remote = fsspec.core.url_to_fs(output_url)
        except Exception as e:
            return [], [f"outputs: cannot open {output_url}: {e}"]
    for rel, src in files.items():
        try:
            fd = _open_checked(src, roots)
        except Exception as e:
            errors.append(f"output {rel}: {e}")
            continue
        try:
            st = os.fstat(fd)
            size = st.st_size
            if left is not None and size > left:
                raise OSError(f"over the bound of {_gib(limit)} on outputs (outputs_max)")
            if left is not None:
                left -= size
            if dest is not None:
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
                with open(tmp, "wb") as out:
                    digest = _copy_hashing(fd, out, size)
                os.replace(tmp, target)
            elif fs is not None:
                from trainyard.artifacts.transfer import put_file

                opened = Path(f"/proc/self/fd/{fd}")  # the file checked, whatever its path now leads to
                size, digest = put_file(fs, opened, f"{remote.rstrip('/')}/{rel}")
                digest = digest.removeprefix("sha256:")
            else:
                digest = _copy_hashing(fd, None, size)
        except Exception as e:
            errors.append(f"output {rel}: {e}")
            continue
        finally:
            os.close(fd)
        records.append({"path": rel, "size": size, "digest": f"sha256:{digest}"})
    return records, errors


def keep_log(log: Path, url: str, masks=None) -> str | None:  # noqa: ANN001
    """Copy the attempt's full log to ``url`` (the artifact store), with ``masks`` (the job's secret
    values, :class:`trainyard.launch.secrets.Masks`) applied; what went wrong, if anything."""
    if not log.exists():
        return None
    masked = log.with_name(log.name + ".masked")
    try:
        from trainyard.artifacts.transfer import open_fs, put_file

        fs, path = open_fs(url)
        if masks:
            masks.copy(str(log), str(masked))
        put_file(fs, masked if masks else log, path)
    except Exception as e:  # the attempt's result matters more than a copy of its log
        return f"log not kept at {url}: {e}"
    finally:
        masked.unlink(missing_ok=True)
    return None
