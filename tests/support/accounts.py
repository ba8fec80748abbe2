"""Tests that switch to another OS account (``nobody``), as a root launcher does for ``--os-user``."""

from __future__ import annotations

import os
import shutil
import sys

from tests.conftest import need
from trainyard.launch.runas import RunAs

NOBODY = {"uid": 65534, "gid": 65534, "name": "nobody"}


def nobody_python(python: str) -> str:
    """``python`` if ``nobody`` may run it, else Debian's Python of the same version (as a node's would be):
    this sandbox's own is under /root (0700). Skips (fails on CI) without root, setpriv or either Python."""
    need(os.geteuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv to switch accounts")
    nobody = RunAs(NOBODY)
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    runnable = python if nobody.can_run(python) else system if nobody.can_run(system) else None
    need(runnable is not None, f"a Python {sys.version_info[:2]} that nobody can run ({system})")
    return runnable
