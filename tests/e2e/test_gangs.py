"""Multi-replica jobs on the local engine: torchrun-style env, fail-fast gangs, cancel."""

import json
import subprocess
import sys

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
    # replica by replica: the whole log interleaves the replicas' chunks as they came
    seen = [json.loads(line) for r in (0, 1) for line in job.logs(replica=r).splitlines()]
    assert sorted(int(e["RANK"]) for e in seen) == [0, 1, 2, 3]
    assert {e["WORLD_SIZE"] for e in seen} == {"4"} and {e["LOCAL_WORLD_SIZE"] for e in seen} == {"2"}
    assert {(e["NODE_RANK"], e["LOCAL_RANK"], e["RANK"]) for e in seen} == {
        ("0", "0", "0"), ("0", "1", "1"), ("1", "0", "2"), ("1", "1", "3")}
    assert len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in seen}) == 1
    assert {e["TORCHELASTIC_RUN_ID"] for e in seen} == {info.attempts[0].id}
    by_node_rank = {e["NODE_RANK"]: e["CUDA_VISIBLE_DEVICES"].split(",") for e in seen}
    assert sorted(by_node_rank["0"] + by_node_rank["1"]) == ["0", "1", "2", "3"]
    assert [r.gpus for r in info.attempts[0].replicas] == [by_node_rank["0"], by_node_rank["1"]]
    replica_1 = [json.loads(line) for line in job.client.job(job.id).logs(replica=1).splitlines()]
    assert len(replica_1) == 2 and {e["NODE_RANK"] for e in replica_1} == {"1"}


def test_one_failing_replica_fails_the_gang_fast_and_it_is_retried_whole(server):
    code = ("import os, sys, time\n"
            "if os.environ['RANK'] == '1' and os.environ['TRAINYARD_ATTEMPT'] == '1':\n"
            "    time.sleep(0.5); sys.exit(7)\n"
            "time.sleep(300 if os.environ['TRAINYARD_ATTEMPT'] == '1' else 0.2)\n"
            "print('rank', os.environ['RANK'], 'done')")
    job = server.client().submit(py_job(code, replicas=2, distributed="torch", grace_period=2,
                                        resources={"cpu": 0.5}, retry={"max": 1, "backoff": 0}))
    info = job.wait(timeout=90)  # long before the healthy replica's 300 s sleep would end: it was stopped
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


GANG_LOG = """
import os, pathlib, sys, time
attempt, rank = os.environ["TRAINYARD_ATTEMPT"], os.environ["NODE_RANK"]
for i in range(3):
    print(f"a{attempt} r{rank} line {i}", flush=True)
if attempt == "1":  # replica 1 fails once replica 0 has written its lines (a slow start would lose them)
    printed = pathlib.Path(sys.argv[1] + ".a1r0")
    if rank == "0":
        printed.touch()
        time.sleep(300)
    while not printed.exists():
        time.sleep(0.05)
    sys.exit(3)
while not pathlib.Path(sys.argv[1]).exists():
    time.sleep(0.05)
print(f"a{attempt} r{rank} end", flush=True)
"""


def test_trainyard_logs_follows_prefixes_replicas_and_picks_attempts_and_replicas(server, tmp_path):
    flag = tmp_path / "flag"
    job = server.client().submit({"name": "gang-logs", "command": [sys.executable, "-c", GANG_LOG, str(flag)],
                                  "replicas": 2, "distributed": "torch", "grace_period": 1,
                                  "resources": {"cpu": 0.5}, "retry": {"max": 1, "backoff": 0}})
    until(lambda: job.logs(attempt=2).count("line 2") == 2, timeout=60)

    # -f: streams what is there, keeps going while the job runs, ends when it ends
    out = tmp_path / "follow.txt"
    with open(out, "w") as sink:
        follow = subprocess.Popen([sys.executable, "-m", "trainyard", "logs", job.id, "-f", "--attempt", "2"],
                                  env={**server.env, "TRAINYARD_SERVER": server.url}, stdout=sink,
                                  stderr=subprocess.STDOUT, text=True)
        try:
            until(lambda: out.read_text().count("line 2") == 2, timeout=30)
            assert follow.poll() is None and "end" not in out.read_text()
            flag.touch()
            assert follow.wait(timeout=60) == 0
        finally:
            if follow.poll() is None:
                follow.kill()
    followed = out.read_text().splitlines()
    assert sorted(followed) == sorted(f"[r{r}] a2 r{r} {w}" for r in (0, 1) for w in
                                      ("line 0", "line 1", "line 2", "end"))
    assert job.wait(timeout=30).status.value == "succeeded"

    everything = server.cli("logs", job.id)
    assert everything.returncode == 0, everything.stderr
    lines = [line for line in everything.stdout.splitlines() if "[trainyard]" not in line]  # not the launcher's
    assert "[r0] [trainyard] cancelled" in everything.stdout  # replica 0 of attempt 1, stopped with the gang
    assert [line for line in lines if not line.startswith(f"[r{line.split()[2][1:]}] ")] == []  # [rN]: its replica
    assert {line.split()[1] for line in lines} == {"a1", "a2"}  # all attempts, in order
    assert [line.split()[1] for line in lines] == sorted(line.split()[1] for line in lines)

    one = server.cli("logs", job.id, "--replica", "1")
    assert one.returncode == 0 and one.stdout.splitlines() == [
        "a1 r1 line 0", "a1 r1 line 1", "a1 r1 line 2", "a2 r1 line 0", "a2 r1 line 1", "a2 r1 line 2", "a2 r1 end"]
    first = server.cli("logs", job.id, "--attempt", "1", "--replica", "0")
    assert first.returncode == 0 and first.stdout.splitlines()[:3] == ["a1 r0 line 0", "a1 r0 line 1", "a1 r0 line 2"]
    assert [line.split(":")[0] for line in first.stdout.splitlines()[3:]] == ["[trainyard] cancelled"]  # stopped
