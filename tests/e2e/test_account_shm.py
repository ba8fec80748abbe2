"""A job run as an account (``--os-user``) has a /dev/shm of its own: what it leaves there goes with it, and
`trainyard exec` into it sees that one, not the node's where other jobs of the account may have left theirs."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest

from tests.conftest import need_readonly_mounts
from tests.e2e.helpers import until
from tests.e2e.test_identity import As, cli_as
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def alice():
    """A server with auth, and its user alice, whose jobs run as nobody: the server, alice's token."""
    need_readonly_mounts()  # root, CAP_SYS_ADMIN and util-linux's unshare: what a node running accounts' jobs has
    root = tempfile.mkdtemp(prefix="trainyard-shm-")
    os.chmod(root, 0o711)  # as test_identity's: the account passes through to its folders
    srv = ServerProcess(Path(root) / "home", ["--auth", "--cpus", "2", "--memory", "2Gi"])
    srv.start()
    try:
        with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as admin:
            made = admin.post("/api/v1/users", json={"name": "alice", "team": "vision", "os_user": "nobody"}).json()
        yield srv, made["token"]["secret"]
    finally:
        srv.stop_all()
        shutil.rmtree(root, ignore_errors=True)


def test_what_an_account_s_job_puts_in_dev_shm_is_gone_with_it(alice):
    srv, token = alice
    # given a job of alice's (run as nobody) that leaves 8 MiB in /dev/shm, under a 64 MiB limit
    job = As(srv, token).submit({"name": "shm", "resources": {"memory": "64Mi", "cpu": 0.5}, "command":
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


def test_trainyard_exec_into_an_account_s_job_sees_its_dev_shm_not_the_node_s(alice):
    srv, token = alice
    # given what an earlier job of the account left in the node's /dev/shm
    left = Path(f"/dev/shm/left-by-another-{os.getpid()}")
    left.write_text("theirs")
    os.chown(left, 65534, 65534)
    try:
        # and a job of alice's that holds a file in its own /dev/shm, under a 64 MiB limit
        job = As(srv, token).submit({"name": "held", "resources": {"memory": "64Mi", "cpu": 0.5}, "command":
                                     "echo mine > /dev/shm/mine && echo holding && sleep 600"}).json()["id"]
        until(lambda: "holding" in srv.client().job(job).logs(), timeout=60)
        # when alice looks into it
        looked = cli_as(srv, token, "exec", job, "--", "sh", "-c", "echo $(ls /dev/shm); df -k /dev/shm | tail -1")
        touched = cli_as(srv, token, "exec", job, "--", "cat", str(left))
    finally:
        left.unlink()
    # then she sees the job's own /dev/shm, the tmpfs of its limit's size, and nothing the node's holds
    assert looked.returncode == 0, looked.stderr
    listed, df = looked.stdout.splitlines()
    assert listed == "mine" and df.split()[:2] == ["trainyard-shm", str(64 * 1024)], looked.stdout
    assert touched.returncode == 1 and "No such file" in touched.stdout + touched.stderr, touched
    As(srv, token).post(f"/api/v1/jobs/{job}/cancel")
