"""Uploading an attempt's outputs when it is over.

What goes: everything under ``ATTEMPT_DIR/outputs`` (``TRAINYARD_OUTPUT_DIR``),
plus files of the work dir matching the spec's ``outputs`` globs, each at its
path relative to the folder it came from. Where it goes: ``output_url``
(a local folder or ``file://`` is a plain copy; any other URL goes through
fsspec). Each file is recorded as ``{"path", "size", "digest": "sha256:<hex>"}``.
An upload error is reported in the message, never raised: the attempt's
result matters more than any one file.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from trainyard.launch.files import local_path

BLOCK = 1 << 20


def collect(outputs_dir: Path, work: Path, globs: list[str]) -> tuple[dict[str, Path], list[str]]:
    """Relative posix path -> local file, and complaints about bad globs.

    The outputs folder wins when both places have a file at the same path.
    """
    files: dict[str, Path] = {}
    problems: list[str] = []
    if outputs_dir.is_dir():
        for p in sorted(outputs_dir.rglob("*")):
            if p.is_file():
                files[p.relative_to(outputs_dir).as_posix()] = p
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
        for match in matches:
            for p in ([match] if match.is_file() else sorted(match.rglob("*"))):
                if not p.is_file() or not p.resolve().is_relative_to(root):
                    continue
                files.setdefault(p.relative_to(work).as_posix(), p)
    return files, problems


def _copy_hashing(src: Path, dst) -> str:
    """Copy ``src`` into the open file ``dst`` (or just read it when None); its sha256."""
    h = hashlib.sha256()
    with open(src, "rb") as f:
        while block := f.read(BLOCK):
            h.update(block)
            if dst is not None:
                dst.write(block)
    return h.hexdigest()


def upload(files: dict[str, Path], output_url: str | None) -> tuple[list[dict], list[str]]:
    """Send ``files`` to ``output_url``; the records of those that made it, and errors.

    With no ``output_url`` nothing is copied, but the files are still listed.
    """
    records, errors = [], []
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
            size = src.stat().st_size
            if dest is not None:
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
                with open(tmp, "wb") as out:
                    digest = _copy_hashing(src, out)
                os.replace(tmp, target)
            else:
                digest = _copy_hashing(src, None)
                if fs is not None:
                    path = f"{remote.rstrip('/')}/{rel}"
                    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
                    fs.put_file(str(src), path)
        except Exception as e:
            errors.append(f"output {rel}: {e}")
            continue
        records.append({"path": rel, "size": size, "digest": f"sha256:{digest}"})
    return records, errors
