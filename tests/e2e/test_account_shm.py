"""A job run as an account (``--os-user``) has a /dev/shm of its own: what it leaves there goes with it."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest

from tests.conftest import need_readonly_mounts
from tests.e2e.test_identity import As
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow


def test_what_an_account_s_job_puts_in_dev_shm_is_gone_with_it():
    need_readonly_mounts()  # root, CAP_SYS_ADMIN and util-linux's unshare: what a node running accounts' jobs has
    root = tempfile.mkdtemp(prefix="trainyard-shm-")
    os.chmod(root, 0o711)  # as test_identity's: the account passes through to its folders
    srv = ServerProcess(Path(root) / "home", ["--auth", "--cpus", "2", "--memory", "2Gi"])
    srv.start()
    try:
        with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as admin:
            made = admin.post("/api/v1/users", json={"name": "alice", "team": "vision", "os_user": "nobody"}).json()
        alice = As(srv, made["token"]["secret"])
        # given a job of alice's (run as nobody) that leaves 8 MiB in /dev/shm, under a 64 MiB limit
        job = alice.submit({"name": "shm", "resources": {"memory": "64Mi", "cpu": 0.5}, "command":
                            'head -c 8M /dev/zero > /dev/shm/held-$TRAINYARD_JOB_ID && ls /dev/shm && '
                            "df -k /dev/shm | tail -1"}).json()["id"]
        # when it ends
        c = srv.client()
        info, logs = c.wait(job, timeout=90), c.job(job).logs()
        # then it wrote there, in a tmpfs of its limit's size, and the node's /dev/shm never held it
        assert info.status.value == "succeeded", logs
        listed, df = logs.splitlines()
        assert listed == f"held-{job}" and df.split()[1] == str(64 * 1024), logs
        assert not Path(f"/dev/shm/held-{job}").exists()
    finally:
        srv.stop_all()
        shutil.rmtree(root, ignore_errors=True)
