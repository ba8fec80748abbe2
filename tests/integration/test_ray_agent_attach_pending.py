"""A Ray node agent asked to attach (``config=None``) to a replica whose start still waits for its
placement group follows that start: the server that asked for it restarted, and the new one attaches.

Before, the attach answered ``not-started`` at once; the engine launched the attempt again with a new
token, while the first call, still waiting in the agent, started the launcher with the old one once
the group was placed: every report refused, the job "starting" for good (a server killed while
another Ray user held a node, then restarted: two jobs of three, 2026-12-01).

On the shared cluster: zone a's node (2 CPUs) is held by a group of "another user", so the
replica's group stays pending; the first driver asks the agent to start the launcher and dies, the
second attaches, then frees the node. The agent is a named detached actor, as the engine makes it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.test_launcher_support import make_config, report_server  # noqa: F401  (a fixture)
from trainyard.spec.reports import LaunchResult
from trainyard.status import Reason

pytestmark = pytest.mark.slow

NS = "test-attach-pending"
FIRST = """
import json, os, sys, ray
from ray.util.placement_group import placement_group
from trainyard.engines.ray.actor import NodeAgent

address, config, workdir = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
ray.init(address=address, namespace="%(ns)s", logging_level="ERROR")
hold = placement_group([{"CPU": 2}], name="%(ns)s-hold", lifetime="detached", bundle_label_selector=[{"zone": "a"}])
ray.get(hold.ready(), timeout=60)
pg = placement_group([{"CPU": 1}], name="%(ns)s-pg", lifetime="detached", bundle_label_selector=[{"zone": "a"}])
agent = ray.remote(NodeAgent).options(name="%(ns)s-agent", lifetime="detached", max_concurrency=8,
                                      num_cpus=0).remote()
ref = agent.run.remote("pa-1-r0", config, workdir, None, pg)
ready, _ = ray.wait([ref], timeout=3)  # the agent has the call, and waits for the group
print("PENDING", json.dumps(not ready), flush=True)
os._exit(0)  # as a killed server: no goodbye to Ray
""" % {"ns": NS}
SECOND = """
import json, sys, ray
from ray.util.placement_group import remove_placement_group

address, workdir = sys.argv[1], sys.argv[2]
ray.init(address=address, namespace="%(ns)s", logging_level="ERROR")
agent = ray.get_actor("%(ns)s-agent")
try:
    ref = agent.run.remote("pa-1-r0", None, workdir, None, None)
    ready, _ = ray.wait([ref], timeout=3)
    early = ray.get(ready[0]) if ready else None
    remove_placement_group(ray.util.get_placement_group("%(ns)s-hold"))  # the other user leaves
    result = early or ray.get(ref, timeout=90)
    print("ANSWER", json.dumps({"early": str(early) if early else None, "result": result if isinstance(result, str)
                                else result.model_dump(mode="json")}), flush=True)
finally:
    for name in ("%(ns)s-hold", "%(ns)s-pg"):
        try:
            remove_placement_group(ray.util.get_placement_group(name))
        except Exception:
            pass
    ray.kill(agent)
""" % {"ns": NS}


def answer(out: subprocess.CompletedProcess, tag: str):
    assert out.returncode == 0, out.stderr[-3000:]
    # Ray prints its autoscaler's events to the driver's stdout too, before or after this line
    return json.loads(next(line for line in out.stdout.splitlines() if line.startswith(tag + " "))[len(tag) + 1:])


def test_an_attach_to_a_replica_waiting_for_its_group_follows_the_start_that_waits(
        shared_ray_cluster, tmp_path, report_server):
    workdir = tmp_path / "attempts" / "pa-1" / "r0"
    config = make_config(tmp_path / "draft", report_server.url, [sys.executable, "-c", "print('ran')"],
                         grace_period=0.5, exit_report_deadline=5)
    address = shared_ray_cluster.address

    # given a start waiting in the agent for a group Ray cannot place yet, whose caller died
    first = subprocess.run([sys.executable, "-c", FIRST, address, json.dumps(config.to_dict()), str(workdir)],
                           capture_output=True, text=True, timeout=180)
    assert answer(first, "PENDING") is True

    # when another caller attaches, and the node is freed
    second = subprocess.run([sys.executable, "-c", SECOND, address, str(workdir)],
                            capture_output=True, text=True, timeout=180)
    got = answer(second, "ANSWER")

    # then the attach waited with that start, and answers the launcher's result
    assert got["early"] is None, got
    result = LaunchResult.model_validate(got["result"])
    assert result.kind is Reason.SUCCEEDED, result
    assert report_server.final()["result"]["reason"] == "Succeeded"
