"""Killing the server with SIGKILL mid-job loses nothing and runs nothing twice."""

import json
import subprocess
import sys

import pytest

from tests.e2e.helpers import py_job, until

pytestmark = pytest.mark.slow


def test_server_sigkill_and_restart_mid_job(server, tmp_path):
    c = server.client()
    runs = tmp_path / "runs"
    long = c.submit(py_job(
        f"import time\nopen({str(runs)!r}, 'a').write('x')\n"
        "for i in range(30):\n    print(f'line {i}', flush=True); time.sleep(0.1)\n"
        "import trainyard; trainyard.log_metrics(step=1, done=1.0)"))
    short = c.submit(py_job("import time; time.sleep(1.0); print('short done')"))
    until(lambda: "line 3" in long.logs())
    # the short job too must be launched before the kill (on a loaded machine it may be a cycle behind the
    # long one), or nothing would run it while the server is down
    until(lambda: short.refresh().status.value in ("running", "succeeded"))

    server.kill()
    until(lambda: short_finished_on_disk(server, short.id), timeout=20)  # it ends while the server is down
    server.start()

    c = server.client()
    info = c.wait(long.id, timeout=60)
    assert info.status.value == "succeeded" and len(info.attempts) == 1
    # its launcher may be in a backoff sleep (≤ 2 s) when the server comes back
    assert c.wait(short.id, timeout=30).status.value == "succeeded"
    assert c.job(short.id).logs() == "short done\n"
    assert [line for line in c.job(long.id).logs().splitlines()] == [f"line {i}" for i in range(30)]
    assert [m.name for m in c.metrics(long.id)] == ["done"]
    assert runs.read_text() == "x"  # ran exactly once


def short_finished_on_disk(server, job_id) -> bool:
    return (server.home / "attempts" / f"{job_id}-1" / "r0" / "result.json").exists()


def test_a_quick_run_follow_goes_on_through_a_server_restart_and_prints_each_line_once(server, tmp_path):
    flag = tmp_path / "flag"
    code = (f"import os, time\nprint('before', flush=True)\nwhile not os.path.exists({str(flag)!r}): "
            "time.sleep(0.05)\nprint('after', flush=True)")
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: survives\ncommand: [{sys.executable}, -c, {json.dumps(code)}]\n")
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    # no TRAINYARD_SERVER: it finds the home's server, and finds it again where the restarted one listens
    env = {**server.env, "PYTHONPROFILEIMPORTTIME": "1"}
    with open(out, "w") as stdout, open(err, "w") as stderr:
        follow = subprocess.Popen([sys.executable, "-m", "trainyard", "run", str(spec), "--follow"],
                                  env=env, stdout=stdout, stderr=stderr, text=True)
        try:
            until(lambda: "before" in out.read_text(), timeout=60)
            server.kill()  # the stream drops mid-job
            server.start()
            flag.touch()
            assert follow.wait(timeout=90) == 0, err.read_text()[-2000:]
        finally:
            if follow.poll() is None:
                follow.kill()
    loaded = {line.split("|")[-1].strip() for line in err.read_text().splitlines() if line.startswith("import time:")}
    assert loaded and "typer" not in loaded  # the quick path's own reconnect, not the full SDK's
    assert out.read_text().splitlines() == ["before", "after"]
