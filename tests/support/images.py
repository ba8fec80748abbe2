"""Container images built here for the container tests: no registry is reachable from CI.

Each image is a root filesystem imported with ``podman import``, tagged with
the hash of its recipe, so it is built once: an image already in podman's store
is reused, and the rootfs tarball is kept under ``~/.cache/trainyard-test-images``
for a store that was wiped.

- ``busybox``: the static busybox of Debian's ``busybox-static``, a few KiB of tar.
- ``python``: a minimal Debian (``mmdebstrap --variant=minbase``) with python3 and
  python3-venv and python3-pip, from Debian's packages (reachable through apt); a minute or two once.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

CACHE = Path(os.environ.get("TRAINYARD_TEST_IMAGES", Path.home() / ".cache" / "trainyard-test-images"))
BUSYBOX = "/bin/busybox"
APPLETS = ("sh", "cat", "echo", "sleep", "ls", "head", "dd", "mkdir", "env", "true", "false", "touch", "tail")
PYTHON_RECIPE = ["mmdebstrap", "--variant=minbase", "--include=python3,python3-venv,python3-pip", "bookworm"]


def _exists(tag: str) -> bool:
    return subprocess.run(["podman", "image", "exists", tag], capture_output=True).returncode == 0


def _import(tar: Path, tag: str) -> str:
    subprocess.run(["podman", "import", str(tar), tag], check=True, capture_output=True, timeout=600)
    return tag


def _built(tar_path: Path, tag: str, build: Callable[[Path], None]) -> str:
    """The image ``tag``, imported from ``tar_path``, which ``build(tmp)`` writes first where it is missing.
    One process at a time: pytest-xdist's two workers may each ask for the same image at once (a module's
    tests are spread over both), and two builds into one file lost one's rename."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{tar_path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _exists(tag):  # the other worker's, while this one waited
            return tag
        if not tar_path.exists():
            tmp = tar_path.with_name(f"{tar_path.stem}.{os.getpid()}.building.tar")  # mmdebstrap reads .tar
            build(tmp)
            tmp.replace(tar_path)
        return _import(tar_path, tag)


def busybox_image(marker: str | None = None) -> str:
    """``localhost/trainyard-test/busybox:<recipe hash>``, built if missing.

    With ``marker``, an image of its own whose ``/image-name`` holds it: tests tell images apart by it."""
    binary = Path(BUSYBOX).read_bytes()
    key = hashlib.sha256(binary + ",".join(APPLETS).encode() + (marker or "").encode()).hexdigest()[:12]
    tag = f"localhost/trainyard-test/busybox{'-' + marker if marker else ''}:{key}"
    if _exists(tag):
        return tag

    def build(tmp: Path) -> None:
        with tarfile.open(tmp, "w") as tar:
            for d in ("bin", "tmp", "proc", "sys", "dev", "etc"):
                info = tarfile.TarInfo(d)
                info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
                tar.addfile(info)
            info = tarfile.TarInfo("bin/busybox")
            info.size, info.mode = len(binary), 0o755
            tar.addfile(info, io.BytesIO(binary))
            if marker:
                info = tarfile.TarInfo("image-name")
                info.size, info.mode = len(marker) + 1, 0o644
                tar.addfile(info, io.BytesIO(marker.encode() + b"\n"))
            for applet in APPLETS:
                link = tarfile.TarInfo(f"bin/{applet}")
                link.type, link.linkname = tarfile.SYMTYPE, "busybox"
                tar.addfile(link)

    return _built(CACHE / f"busybox-{marker + '-' if marker else ''}{key}.tar", tag, build)


def python_image() -> str:
    """``localhost/trainyard-test/python:<recipe hash>``: Debian bookworm's python3, built if missing."""
    key = hashlib.sha256(" ".join(PYTHON_RECIPE).encode()).hexdigest()[:12]
    tag = f"localhost/trainyard-test/python:{key}"
    if _exists(tag):
        return tag
    return _built(CACHE / f"python-{key}.tar", tag, lambda tmp: subprocess.run(
        [*PYTHON_RECIPE, str(tmp)], check=True, capture_output=True, timeout=900))


def image_python_version(tag: str) -> str:
    """``3.11`` for the image's python3."""
    out = subprocess.run(["podman", "run", "--rm", tag, "python3", "-c",
                          "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip()


def tools_missing() -> list[str]:
    return [t for t in ("podman", "mmdebstrap") if shutil.which(t) is None] + (
        [] if Path(BUSYBOX).exists() else [BUSYBOX])


def leftover_containers() -> list[str]:
    """Names of trainyard containers podman still has, running or not."""
    out = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                         timeout=60)
    return [n for n in out.stdout.split() if n.startswith("trainyard-")]
