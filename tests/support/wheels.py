"""A tiny wheel for tests that pip-install a local package offline."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def make_wheel(folder: Path) -> Path:
    """A pure-Python wheel written by hand: installing it needs no build backend and no index."""
    path = folder / "tinypkg-0.1-py3-none-any.whl"
    files = {"tinypkg/__init__.py": "VALUE = 42\n",
             "tinypkg-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
             "tinypkg-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(text)}")
        record.append("tinypkg-0.1.dist-info/RECORD,,")
        z.writestr("tinypkg-0.1.dist-info/RECORD", "\n".join(record) + "\n")
    return path
