"""Multi-replica jobs on the local engine: torchrun-style env, fail-fast gangs, cancel."""

import json
import time

import pytest

from tests.e2e.helpers import py_job, until

pytestmark = pytest.mark.slow

ENV_KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "TORCHELASTIC_RUN_ID", "CUDA_VISIBLE_DEVICES"]


def test_each_process_gets_torchrun_env_and_its_own_gpus(server):
    code = f"import os, json; print(json.dumps({{k: os.environ[k] for k in {ENV_KEYS!r}}}), flush=True)"
    job = server.client().submit(py_job(code, replicas=2, procs_per_replica=2, distributed="torch",
                                        resources={"cpu": 0.5, "gpu": 2}))
    info = job.wait(timeout=60)
    assert info.status.value == "succeeded", job.logs()
    seen = [json.loads(line) for line in job.logs().splitlines()]
    assert sorted(int(e["RANK"]) for e in seen) == [0, 1, 2, 3]
    assert {e["WORLD_SIZE"] for e in seen} == {"4"} and {e["LOCAL_WORLD_SIZE"] for e in seen} == {"2"}
    assert {(e["NODE_RANK"], e["LOCAL_RANK"], e["RANK"]) for e in seen} == {
        ("0", "0", "0"), ("0", "1", "1"), ("1", "0", "2"), ("1", "1", "3")}
    assert len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in seen}) == 1
    assert {e["TORCHELASTIC_RUN_ID"] for e in seen} == {info.attempts[0].id}
    by_node_rank = {e["NODE_RANK"]: e["CUDA_VISIBLE_DEVICES"].split(",") for e in seen}
    assert sorted(by_node_rank["0"] + by_node_rank["1"]) == ["0", "1", "2", "3"]
    assert [r.gpus for r in info.attempts[0].replicas] == [by_node_rank["0"], by_node_rank["1"]]
    assert "".join(job.client.job(job.id).logs(replica=1).splitlines()[0]).startswith("{")


def test_one_failing_replica_fails_the_gang_fast_and_it_is_retried_whole(server):
    code = ("import os, sys, time\n"
            "if os.environ['RANK'] == '1' and os.environ['TRAINYARD_ATTEMPT'] == '1':\n"
            "    time.sleep(0.5); sys.exit(7)\n"
            "time.sleep(60 if os.environ['TRAINYARD_ATTEMPT'] == '1' else 0.2)\n"
            "print('rank', os.environ['RANK'], 'done')")
    job = server.client().submit(py_job(code, replicas=2, distributed="torch", grace_period=2,
                                        resources={"cpu": 0.5}, retry={"max": 1, "backoff": 0}))
    started = time.monotonic()
    info = job.wait(timeout=60)
    assert time.monotonic() - started < 20  # not the 60 s the healthy replica would sleep
    assert info.status.value == "succeeded"
    first, second = info.attempts
    assert first.reason == "Error(exit 7)" and "replica 1" in first.message
    assert [r.reason for r in first.replicas] == ["Cancelled", "Error(exit 7)"]
    assert [r.status.value for r in second.replicas] == ["succeeded", "succeeded"]


def test_cancel_stops_every_replica(server):
    job = server.client().submit(py_job("import time; print('up', flush=True); time.sleep(300)", replicas=3,
                                        distributed="torch", grace_period=1, resources={"cpu": 0.5}))
    until(lambda: job.logs().count("up") == 3)
    job.cancel()
    info = job.wait(timeout=30)
    assert info.status.value == "cancelled"
    assert [r.reason for r in info.attempts[0].replicas] == ["Cancelled"] * 3
