"""A launcher forked ahead runs its path's steps while it waits (warmup.touch): on nothing of its own."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import pytest

from trainyard.launch import warmup

PR_GET_CHILD_SUBREAPER = 37


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if "__pycache__" not in p.parts)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are Linux's")
def test_touch_runs_every_step_writes_nothing_and_makes_its_process_a_subreaper(monkeypatch):
    package = Path(warmup.__file__).parent
    before, environ = _listing(package), dict(os.environ)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # in a child: becoming a subreaper is for good
        code = 1
        try:
            os.close(r)
            warmup._touch()  # raises where touch() would hide it (and so no longer pre-touch anything)
            flag = ctypes.c_int(0)
            ctypes.CDLL(None).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
            os.write(w, f"{flag.value}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    said = os.read(r, 16)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert said == b"1"
    assert _listing(package) == before
    assert dict(os.environ) == environ
