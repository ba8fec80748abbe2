"""A job whose placement group Ray cannot place, because another Ray user holds the node, says why while it
waits (its reason, as `trainyard show` prints it, with what Ray says of the group), is not ended by the
server's start deadline meanwhile, and runs once the other user lets the node go.

On the shared cluster: zone a's node has 2 CPUs; "another user" (a driver of its own, in a namespace of its
own) holds them with a detached placement group, and the job asks 1 CPU there.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow

HOLD = "other-user-hold"
OTHER_USER = """
import sys, ray
from ray.util.placement_group import placement_group, remove_placement_group
ray.init(address=sys.argv[1], namespace="other-user", logging_level="ERROR")
if sys.argv[2] == "hold":
    pg = placement_group([{"CPU": 2}], name="%(hold)s", lifetime="detached", bundle_label_selector=[{"zone": "a"}])
    ray.get(pg.ready(), timeout=120)
else:
    try:
        remove_placement_group(ray.util.get_placement_group("%(hold)s"))
    except Exception:
        pass
print("DONE", flush=True)
""" % {"hold": HOLD}
START_DEADLINE = 3


def other_user(address: str, what: str) -> None:
    out = subprocess.run([sys.executable, "-c", OTHER_USER, address, what], capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0 and "DONE" in out.stdout, out.stderr[-3000:]


@pytest.fixture
def server(shared_ray_cluster, tmp_path):
    config = tmp_path / "server.yaml"
    config.write_text(f"start_deadline: {START_DEADLINE}\n")
    srv = ServerProcess(tmp_path / "home", ["--engine", "ray", "--ray-address", shared_ray_cluster.address,
                                            "--config", str(config)])
    srv.start(timeout=90)
    yield srv
    srv.stop()


def test_a_job_ray_cannot_place_says_why_waits_past_the_start_deadline_and_runs_once_the_node_is_free(
        shared_ray_cluster, server):
    address = shared_ray_cluster.address
    other_user(address, "hold")
    try:
        # given zone a's CPUs held by another Ray user, and a job that asks one of them
        c = server.client()
        job = c.submit(py_job("print('ran')", resources={"cpu": 1, "node_selector": {"zone": "a"}}))
        # when Ray has not placed its group for a while
        waiting = until(lambda: (j := c.get(job.id)).status.value != "pending" and j.reason and j, timeout=90)
        # then the job is still starting and says why, as Ray sees it, in `trainyard show` too
        assert waiting.status.value == "starting", waiting
        assert waiting.reason.startswith("Ray has not placed the placement group trainyard-"), waiting.reason
        assert "NO_RESOURCES" in waiting.reason and "CPU 1" in waiting.reason, waiting.reason
        shown = server.cli("show", job.id)
        assert shown.returncode == 0 and "Ray has not placed" in shown.stdout, shown.stdout + shown.stderr
        # and the start deadline, passed many times over, did not end it: no launcher is silent there
        later = until(lambda: (j := c.get(job.id)).reason != waiting.reason and j, timeout=60)
        assert later.status.value == "starting" and len(later.attempts) == 1, later
        # when the other user lets the node go, it runs, with nothing more to say
        other_user(address, "free")
        done = job.wait(timeout=120)
        assert done.status.value == "succeeded" and len(done.attempts) == 1, done
        assert "ran" in job.logs()
    finally:
        other_user(address, "free")
