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


def test_the_zygotes_imports_and_warmup_leave_out_random_and_its_reseed_at_every_fork():
    # random's at-fork hook reseeds from the kernel in every launcher the zygote forks
    import subprocess

    code = ("import sys\n"
            "import ctypes, shutil, socket\n"
            "from trainyard.launch import launcher, procs, reporter, sampling, scratchenv, transport, warmup\n"
            "procs.load_prctl(); warmup.warm(2); warmup._touch()\n"
            "print(sorted(m for m in ('random', 'tempfile') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(warmup.__file__).parents[2])})
    assert out.stdout.strip() == "[]", out.stderr


def test_warm_runs_in_a_scratch_folder_it_removes(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    made = []
    real = warmup._warm
    monkeypatch.setattr(warmup, "_warm", lambda scratch, rounds: (made.append(scratch), real(scratch, rounds)))
    warmup.warm(1)
    assert len(made) == 1 and made[0].parent == tmp_path and not made[0].exists()


def test_a_tmpdir_that_is_not_there_leaves_the_scratch_folder_to_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "gone"))
    scratch = Path(warmup._scratch())
    try:
        assert scratch.parent == Path("/tmp") and scratch.is_dir()
    finally:
        scratch.rmdir()
