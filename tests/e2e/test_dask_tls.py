"""A team's Dask cluster takes no connection from another team's job: its scheduler and workers speak mutual TLS
with certificates of their own, which only callers who may see the cluster get (GET /api/v1/clusters/{id}/tls).
A real `trainyard server --auth`, the local engine and real dask.distributed."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from tests.conftest import need_module
from tests.e2e.helpers import py_job
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow
need_module("distributed", "pip install 'trainyard[dask]'")

# what another team's job does with the scheduler's address (which any job on the node finds in /proc)
INTRUDER = """
import os, sys
from distributed import Client
address = sys.argv[1]
for tried in (address, address.replace("tls://", "tcp://")):
    try:
        with Client(tried, timeout=10) as c:
            print("RAN", tried, c.run(os.getuid), flush=True)
    except Exception as e:
        print("REFUSED", tried, type(e).__name__, flush=True)
"""


def user(srv: ServerProcess, admin: str, name: str, team: str) -> str:
    env = {**srv.env, "TRAINYARD_SERVER": srv.url, "TRAINYARD_TOKEN": admin}
    made = subprocess.run([sys.executable, "-m", "trainyard", "admin", "user", "create", name, "--team", team,
                           "--role", "member"], env=env, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


def test_another_teams_job_with_the_schedulers_address_cannot_run_code_on_the_workers(tmp_path):
    from trainyard.dask import new_cluster
    from trainyard.sdk.client import Client

    # given an --auth server with two teams, and vision's cluster (alice's)
    srv = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "4", "--memory", "8Gi"])
    srv.start()
    try:
        admin = (srv.home / "first-admin-token").read_text().strip()
        alice, bob = user(srv, admin, "alice", "vision"), user(srv, admin, "bob", "nlp")
        cluster = new_cluster(workers=1, worker_cpu="500m", worker_memory="1Gi", client=Client(srv.url, token=alice))
        try:
            mine = cluster.get_client()
            mine.wait_for_workers(1, timeout=60)

            # when a job of team nlp (bob's) connects to it with a plain distributed.Client
            with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {bob}"}, timeout=90) as as_bob:
                code = py_job(INTRUDER, name="intruder")
                code["command"] = [*code["command"], cluster.scheduler_address]
                job = as_bob.post("/api/v1/jobs", json={"spec": code}).json()["id"]
                done = as_bob.get(f"/api/v1/jobs/{job}/wait", params={"timeout": 80}).json()
                logs = "".join(c["data"] for c in as_bob.get(f"/api/v1/jobs/{job}/logs").json()["chunks"])
                # then it ran nothing there, over TLS without the cluster's certificate nor over plain TCP
                assert done["status"] == "succeeded", logs
                assert "RAN" not in logs and logs.count("REFUSED") == 2, logs
                # and bob cannot have the cluster's credentials: to him it does not exist
                assert as_bob.get(f"/api/v1/clusters/{cluster.id}/tls").status_code == 404

            # while the owner's notebook-style client still runs code on its workers
            assert list(mine.run(os.getpid).values()) and mine.submit(sum, [1, 2]).result(timeout=60) == 3
            assert cluster.scheduler_address.startswith("tls://")
        finally:
            cluster.close()
    finally:
        srv.stop_all()
