"""A fake ``libnvidia-ml.so.1`` (tests/support/fake_nvml.c) built with gcc, for the real pynvml binding to load in
a process started with :func:`env` (LD_LIBRARY_PATH is read when a process starts: never in this one).

Needs gcc (CI's image has it; ``.ci/run`` installs it where not): skipped on a laptop without, required on CI."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import need

SOURCE = Path(__file__).with_suffix(".c")
LIBRARY = "libnvidia-ml.so.1"  # the name pynvml asks the dynamic loader for


def build(folder: Path) -> Path:
    """The fake library built into ``folder``; the folder, to put on LD_LIBRARY_PATH."""
    gcc = shutil.which("gcc")
    need(gcc is not None, "gcc builds the fake NVML library (apt-get install gcc)")
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(folder / LIBRARY), str(SOURCE)],
                   check=True, capture_output=True)
    return folder


def env(folder: Path, minors: list[int] | None, log: Path | None = None) -> dict[str, str]:
    """The variables a process needs to load the fake from ``folder`` and see GPUs whose device files have these
    ``minors`` (in NVML's index order; None: the driver is not loaded), logging each ``nvmlInit`` to ``log``."""
    found = {"LD_LIBRARY_PATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("LD_LIBRARY_PATH")]))}
    if minors is not None:
        found["FAKE_NVML_MINORS"] = ",".join(map(str, minors))
    if log is not None:
        found["FAKE_NVML_LOG"] = str(log)
    return found


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory) -> Path:
    """The folder of the fake library, built once a session."""
    return build(tmp_path_factory.mktemp("fake-nvml"))
