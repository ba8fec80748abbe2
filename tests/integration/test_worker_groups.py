"""`make test`'s two workers keep each module on one of them, and every user of the shared Ray cluster on one.

The rule is ``tests/support/groups.py``'s; this runs it on a small suite of its own under ``pytest -n 2 --dist
loadgroup``, as ``make test`` does, and reads which worker ran each test. It broke once without a failing test:
xdist 3.8 writes its group to a field pytest 9.2 stopped reading, and the suite ran a Ray cluster per worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD = """
import json, os

def record(name):
    with open(os.environ["GROUPS_OUT"], "a") as f:
        f.write(json.dumps([name, os.environ.get("PYTEST_XDIST_WORKER")]) + "\\n")
"""
MODULE = """
import time, pytest
from record import record

@pytest.mark.parametrize("i", range(4))
def test_plain(i):
    time.sleep(0.05)  # long enough that the other worker asks for work meanwhile
    record("{name}")

@pytest.mark.ray_cluster
def test_on_ray():
    record("ray")
"""


def test_a_modules_tests_share_a_worker_and_the_shared_ray_clusters_users_share_one(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text('pytest_plugins = ["tests.support.groups"]\n')
    (suite / "record.py").write_text(RECORD)
    for name in ("alpha", "beta", "gamma"):
        (suite / f"test_{name}.py").write_text(MODULE.format(name=name))
    out = tmp_path / "ran.jsonl"
    env = {**os.environ, "GROUPS_OUT": str(out), "PYTHONPATH": f"{ROOT}{os.pathsep}{suite}"}

    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
         "-o", "markers=ray_cluster", "--rootdir", str(suite), str(suite)],
        cwd=suite, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr

    ran = [json.loads(line) for line in out.read_text().splitlines()]
    workers: dict[str, set] = {}
    for name, worker in ran:
        workers.setdefault(name, set()).add(worker)
    assert sorted(workers) == ["alpha", "beta", "gamma", "ray"] and len(ran) == 15
    assert all(len(w) == 1 for w in workers.values()), workers
    assert len(set().union(*workers.values())) == 2  # both workers took work: the groups are what kept them apart
