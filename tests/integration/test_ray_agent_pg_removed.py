"""A Ray node agent waiting for a replica's placement group ends that wait once the group is removed
and no stop or forget reaches it (a restarted server's orphan sweep, a removal by hand): ``run``
answers ``LostContact`` and starts no launcher. While the group is merely pending it waits on.

Before, the wait looped for ever, holding one of the agent's threads and the replica's slot.
On the shared cluster (its largest node has 2 CPUs): the agent is a Ray actor, as the engine
makes it, driven by a script of its own; the group asks for more CPUs than the cluster has.
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

FOREVER = [sys.executable, "-c", "import time; time.sleep(600)"]
DRIVER = """
import json, sys, ray
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
from trainyard.engines.ray.actor import NodeAgent

address, config, workdir = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
ray.init(address=address, namespace="test-pg-removed", logging_level="ERROR")
pg = placement_group([{"CPU": 64}], name="test-pg-removed-never-placed")  # no node has 64 CPUs
agent = ray.remote(NodeAgent).options(max_concurrency=4, num_cpus=0).remote()
ref = agent.run.remote("pr-1-r0", config, workdir, None, pg)
ready, _ = ray.wait([ref], timeout=4)  # a few of the agent's one-second waits: still pending, it waits on
waited = not ready and placement_group_table(pg)["state"] == "PENDING"
remove_placement_group(pg)
result = ray.get(ref, timeout=60)  # the wait ends; before the fix, the driver timed out here
print("ANSWER", json.dumps({"waited": waited, "result": result.model_dump(mode="json")}), flush=True)
"""


def test_removing_a_pending_placement_group_ends_the_agents_wait_and_starts_no_launcher(
        shared_ray_cluster, tmp_path, report_server):
    workdir = tmp_path / "attempts" / "pr-1" / "r0"
    config = make_config(tmp_path / "draft", report_server.url, FOREVER, grace_period=0.5, exit_report_deadline=5)

    # given an agent waiting for a group Ray cannot place; when the group is removed
    out = subprocess.run([sys.executable, "-c", DRIVER, shared_ray_cluster.address, json.dumps(config.to_dict()),
                          str(workdir)], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    # Ray prints its autoscaler's events to the driver's stdout too, before or after this line
    answer = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("ANSWER "))[7:])

    # then it had waited while the group was pending, and answers lost, with no launcher started
    assert answer["waited"], answer
    result = LaunchResult.model_validate(answer["result"])
    assert result.kind is Reason.LOST and "placement group was removed" in result.message, result
    assert not (workdir / "launch.json").exists()
