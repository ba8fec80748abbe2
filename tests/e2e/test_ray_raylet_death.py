"""A Ray node whose raylet dies while the machine lives on (``ray stop``, a raylet crash), or is cut
off from Ray: its jobs' commands stop, and do not run on unseen beside the retries the server starts
elsewhere.

Ray ends a worker whose raylet is gone, and a worker that ends SIGKILLs its child processes: the
launcher, before it could stop the command it runs in a session of its own. Before, the command ran
to its end, unsupervised, while the attempt was already ``NodeLost`` (2026-12-01: a 60 s job ran all
60 s). Each node is one of the test's own, added to the shared cluster, of which it kills (or
freezes) only the raylet.
"""

from __future__ import annotations

import psutil
import pytest

from tests.e2e.helpers import py_job, until
from tests.e2e.test_ray_engine import processes_of
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.ray_cluster(kills_node=True)]


@pytest.fixture
def server(shared_ray_cluster, tmp_path):
    srv = ServerProcess(tmp_path / "home", ["--engine", "ray", "--ray-address", shared_ray_cluster.address])
    srv.start(timeout=90)
    yield srv
    srv.stop()


def running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_the_command_of_a_node_whose_raylet_died_stops_with_it(server, shared_ray_cluster):
    node = shared_ray_cluster.add_worker("raylet-victim", cpus=1, labels={"zone": "raylet-victim"})
    try:
        c = server.client()
        job = c.submit(py_job("import time\nfor i in range(600):\n    print(f'step {i}', flush=True); time.sleep(0.5)",
                              grace_period=2, resources={"cpu": 1, "node_selector": {"zone": "raylet-victim"}}))
        until(lambda: "step 2" in job.logs(), timeout=60)
        command = [p for p in processes_of(job.id) if "trainyard.launch" not in " ".join(p.cmdline())]
        assert len(command) == 1, command

        # when the node's raylet dies, and nothing else of the node
        next(p for p in node.processes() if p.name() == "raylet").kill()

        # then the attempt is lost, and its command ends within its grace period (and a loaded machine's margin)
        info = job.wait(timeout=60)
        assert info.status.value == "failed" and info.attempts[0].reason in ("NodeLost", "LostContact"), info
        until(lambda: not running(command[0]), timeout=2 + 20,
              show=lambda: [(p.pid, p.cmdline()) for p in processes_of(job.id)])
    finally:
        node.kill()  # whatever of the node is left


def test_the_command_of_a_node_cut_off_from_ray_stops_once_the_server_has_ended_its_attempt(server, shared_ray_cluster):
    # a raylet frozen is a node cut off from Ray while its launcher still reaches the server: Ray calls the
    # node dead and the server ends the attempt NodeLost (a retry may start elsewhere, on the same checkpoints);
    # before, the launcher only stopped reporting when the server said so, and its command ran on
    node = shared_ray_cluster.add_worker("raylet-frozen", cpus=1, labels={"zone": "raylet-frozen"})
    try:
        c = server.client()
        job = c.submit(py_job("import time\nfor i in range(600):\n    print(f'step {i}', flush=True); time.sleep(0.5)",
                              grace_period=2, resources={"cpu": 1, "node_selector": {"zone": "raylet-frozen"}}))
        until(lambda: "step 2" in job.logs(), timeout=60)
        command = [p for p in processes_of(job.id) if "trainyard.launch" not in " ".join(p.cmdline())]
        assert len(command) == 1, command

        next(p for p in node.processes() if p.name() == "raylet").suspend()

        info = job.wait(timeout=60)
        assert info.status.value == "failed" and info.attempts[0].reason == "NodeLost", info
        # its next report (a heartbeat: 3 s) hears that, and it stops the command (grace period: 2 s)
        until(lambda: not running(command[0]), timeout=3 + 2 + 20,
              show=lambda: [(p.pid, p.cmdline()) for p in processes_of(job.id)])
    finally:
        node.kill()
