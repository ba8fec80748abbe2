"""Code snapshots: a folder packed reproducibly, named by its content hash.

The tarball is deterministic (sorted names, zeroed times and owners), so the
same code gives the same digest and is stored once. What ``.gitignore``,
``.trainyardignore`` and the built-in list leave out is not packed
(:mod:`trainyard.sdk.ignore`), nor trainyard's home when it sits in the folder
(a demo's state next to its code). Sizes are checked before anything is read.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import warnings
from pathlib import Path

from trainyard.config import home, snapshot_limits
from trainyard.sdk.ignore import pattern_for, walk
from trainyard.spec.units import format_memory, parse_memory

SHOWN = 5  # largest files named in a warning or a refusal


class LargeSnapshot(UserWarning):
    """A code snapshot over the warning size: the message lists its largest files."""


def limits() -> tuple[int, int]:
    """``(warn, max)`` bytes, from the environment (see :func:`trainyard.config.snapshot_limits`)."""
    out = []
    for name, raw in zip(("TRAINYARD_SNAPSHOT_WARN", "TRAINYARD_SNAPSHOT_MAX"), snapshot_limits()):
        try:
            out.append(parse_memory(raw))
        except ValueError as e:
            raise ValueError(f"${name}: {e}") from None
    return out[0], out[1]


def largest(files: list[tuple[str, Path, int]]) -> str:
    """The biggest files, each with the ignore line that would leave it out."""
    total = sum(size for _, _, size in files)
    top = sorted(files, key=lambda f: (-f[2], f[0]))[:SHOWN]
    top = [f for f in top if f[2] * 100 >= total] or top[:1]  # not the small files that are the code
    width = max(len(rel) for rel, _, _ in top)
    lines = [f"  {rel:<{width}}  {format_memory(size):>7}   leave out with: {pattern_for(rel)}" for rel, _, size in top]
    return "\n".join(["largest files:", *lines, "add those lines to .trainyardignore (or .gitignore), "
                      "or pass data as `inputs` instead of the code folder"])


def pack(folder: str | Path) -> tuple[bytes, str]:
    """``(tar.gz bytes, "sha256:<hex>")`` of ``folder``; raises ValueError when it is over the limit
    (naming its largest files), warns :class:`LargeSnapshot` when it is over the warning size."""
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"workdir {str(folder)!r} is not a folder")
    warn_at, max_bytes = limits()
    files = [(rel, path, path.stat().st_size) for rel, path in walk(root, (home().resolve(),))]
    total = sum(size for _, _, size in files)
    if total > max_bytes:
        raise ValueError(f"workdir {str(folder)!r} is {format_memory(total)}, over the limit of "
                         f"{format_memory(max_bytes)}; {largest(files)}")
    if total > warn_at:
        warnings.warn(LargeSnapshot(f"the snapshot of {str(folder)!r} is {format_memory(total)} "
                                    f"(over {format_memory(warn_at)}); {largest(files)}"), stacklevel=2)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, path, _ in files:
            info = tar.gettarinfo(str(path), arcname=rel)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(path, "rb") as f:
                tar.addfile(info, f)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    data = buf.getvalue()
    return data, "sha256:" + hashlib.sha256(data).hexdigest()
