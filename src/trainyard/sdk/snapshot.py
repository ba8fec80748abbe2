"""Code snapshots: a folder packed reproducibly, named by its content hash.

The tarball is deterministic (sorted names, zeroed times and owners), so the
same code gives the same digest and is stored once.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from pathlib import Path

SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache", ".ipynb_checkpoints"}
MAX_BYTES = 512 * 2**20


def pack(folder: str | Path) -> tuple[bytes, str]:
    """``(tar.gz bytes, "sha256:<hex>")`` of ``folder``; raises ValueError when it is too big."""
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"workdir {str(folder)!r} is not a folder")
    raw = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.is_symlink() or not path.is_file():
                    continue
                total += path.stat().st_size
                if total > MAX_BYTES:
                    raise ValueError(f"workdir {str(folder)!r} is over {MAX_BYTES >> 20} MiB; "
                                     "put data in `inputs` instead of the code folder")
                info = tar.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                with open(path, "rb") as f:
                    tar.addfile(info, f)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    data = buf.getvalue()
    return data, "sha256:" + hashlib.sha256(data).hexdigest()
