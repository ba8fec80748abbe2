"""A pipeline run by a user mapped to a Unix account (``--os-user``) with the default local store: a step reads
another step's outputs, which the store (root's alone) holds, through a copy in a cache of the account's own."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from tests.conftest import need
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow

PIPELINE = """
name: p
steps:
  a:
    command: mkdir -p {{outputs.m}} && echo hello > {{outputs.m}}/x.txt
    outputs: [m]
    cache: false
  b:
    inputs: {m: "{{steps.a.outputs.m}}"}
    command: id -u; cat {{inputs.m}}/x.txt
    cache: false
"""


def test_a_step_run_as_an_account_reads_the_outputs_of_the_step_before_from_the_local_store(tmp_path):
    need(os.geteuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv to switch accounts")
    root = Path(tempfile.mkdtemp(prefix="trainyard-osuser-"))
    os.chmod(root, 0o711)  # other accounts pass through to their folders, as to a server's home
    srv = ServerProcess(root / "home", ["--auth", "--cpus", "2", "--memory", "2Gi"])
    srv.start()
    try:
        with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as admin:
            assert admin.post("/api/v1/teams", json={"name": "vision"}).status_code in (200, 201)
            made = admin.post("/api/v1/users", json={"name": "alice", "team": "vision", "os_user": "nobody"}).json()
        (tmp_path / "p.yaml").write_text(PIPELINE)
        env = {**srv.env, "TRAINYARD_SERVER": srv.url, "TRAINYARD_TOKEN": made["token"]["secret"]}
        run = subprocess.run([sys.executable, "-m", "trainyard", "pipeline", "run", str(tmp_path / "p.yaml"),
                              "--follow"], env=env, capture_output=True, text=True, timeout=120)
        ty = lambda *a: subprocess.run([sys.executable, "-m", "trainyard", *a], env=env,  # noqa: E731
                                       capture_output=True, text=True, timeout=60)
        logs = ty("logs", ty("ls", "-l", "trainyard.io/step=b", "--ids").stdout.strip())
        assert run.returncode == 0, run.stdout + run.stderr + logs.stdout + logs.stderr
        assert "65534\nhello" in logs.stdout, logs.stdout + logs.stderr

        # the copy is the account's own (its group's, read-only) in a folder apart from the node's cache
        mine = srv.home / "cache" / "uid-65534"
        assert (mine.stat().st_uid, stat.S_IMODE(mine.stat().st_mode)) == (0, 0o750)
        copies = [p for p in mine.rglob("x.txt")]
        assert copies and all(stat.S_IMODE(p.stat().st_mode) & 0o227 == 0 for p in copies), copies
        assert stat.S_IMODE((srv.home / "artifacts").stat().st_mode) == 0o700
    finally:
        srv.stop_all()
        shutil.rmtree(root, ignore_errors=True)
