"""SIGKILL of the server under 50 running jobs: after a restart none is lost, none ran twice,
and every log is complete."""

import collections
import time

import pytest

from tests.e2e.helpers import py_job, until

pytestmark = pytest.mark.slow
JOBS, LINES = 50, 40


def test_sigkill_under_fifty_running_jobs_loses_nothing_and_runs_nothing_twice(server, tmp_path):
    runs, gate = tmp_path / "runs", tmp_path / "go"
    c = server.client()
    # each job prints a little, waits at the gate (so all 50 run at once), then prints the rest
    code = (f"import os, time, trainyard\nopen({str(runs)!r}, 'a').write(trainyard.params()['i'] + '\\n')\n"
            f"for n in range({LINES}):\n    print(f'line {{n}}', flush=True)\n"
            f"    while n == 9 and not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
            "    time.sleep(0.05)\n"
            "trainyard.log_metrics(step=1, done=1.0)")
    jobs = [c.submit(py_job(code, name=f"chaos-{i}", params={"i": str(i)},
                            resources={"cpu": 0.02, "memory": "64Mi"})) for i in range(JOBS)]
    until(lambda: len(c.jobs(status=["running"], limit=100).items) == JOBS, timeout=90, every=0.5)

    server.kill()
    gate.touch()
    time.sleep(1.0)  # jobs go on printing, and some end, while nobody listens
    server.start()

    c = server.client()
    ended = [c.wait(j.id, timeout=120) for j in jobs]
    assert collections.Counter(e.status.value for e in ended) == {"succeeded": JOBS}
    assert [len(e.attempts) for e in ended] == [1] * JOBS  # none was retried or started again
    assert collections.Counter(runs.read_text().split()) == {str(i): 1 for i in range(JOBS)}  # each ran once
    incomplete = [j.id for j in jobs if c.job(j.id).logs().splitlines() != [f"line {n}" for n in range(LINES)]]
    assert incomplete == []
    assert all([m.name for m in c.metrics(j.id)] == ["done"] for j in jobs)
    print(f"chaos: {JOBS} jobs running at SIGKILL; lost 0, ran twice 0, incomplete logs 0")
