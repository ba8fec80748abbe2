"""A code snapshot keeps its files' owner permission bits from the user's folder to the job's work dir, on a launcher
Python with ``tarfile`` filters or without (3.10, Debian's 3.11.2): setuid, setgid, sticky and write for group and
other are never kept, and the owner can always read (with ``--os-user`` the owner is the job's account)."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from trainyard.launch.prepare import safe_extract
from trainyard.sdk.snapshot import pack

SRC = str(Path(__file__).resolve().parents[2] / "src")
MODES = {"key.pem": (0o600, 0o600), "run.sh": (0o755, 0o755), "shared.txt": (0o640, 0o640),
         "readonly.txt": (0o400, 0o400), "team.txt": (0o664, 0o644), "suid.sh": (0o4755, 0o755),
         "sgid.sh": (0o2750, 0o750), "sticky.txt": (0o1644, 0o644), "nothing.txt": (0o000, 0o400),
         "sub/deep.sh": (0o700, 0o700)}


def _snapshot(tmp_path: Path) -> bytes:
    code = tmp_path / "code"
    for name, (mode, _) in MODES.items():
        (code / name).parent.mkdir(parents=True, exist_ok=True)
        (code / name).write_text("#!/bin/sh\\necho ran\\n")
        os.chmod(code / name, mode)
    data, _ = pack(code)
    return data


def _modes(work: Path) -> dict[str, int]:
    return {name: stat.S_IMODE(os.lstat(work / name).st_mode) for name in MODES}


def test_a_snapshot_keeps_the_owners_bits_and_no_setuid(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    safe_extract(io.BytesIO(_snapshot(tmp_path)), work)
    assert _modes(work) == {name: want for name, (_, want) in MODES.items()}


def _without_filters() -> str | None:
    """A Python on this machine whose ``tarfile`` has no extraction filters, as a node's may be."""
    for exe in ("python3.10", "/usr/bin/python3.11", "/usr/bin/python3"):
        path = shutil.which(exe)
        if path and subprocess.run([path, "-c", "import sys, tarfile; sys.exit(hasattr(tarfile, 'data_filter'))"],
                                   capture_output=True).returncode == 0:
            return path
    return None


def test_a_launcher_python_without_tarfile_filters_keeps_the_same_modes(tmp_path):
    python = _without_filters()
    if python is None:
        pytest.skip("no Python without tarfile filters here")
    (tmp_path / "s.tar.gz").write_bytes(_snapshot(tmp_path))
    work = tmp_path / "work"
    work.mkdir()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from trainyard.launch import untar\n"
            "untar.extract(open(sys.argv[2], 'rb'), __import__('pathlib').Path(sys.argv[3]))")
    done = subprocess.run([python, "-c", code, SRC, str(tmp_path / "s.tar.gz"), str(work)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr
    assert _modes(work) == {name: want for name, (_, want) in MODES.items()}
