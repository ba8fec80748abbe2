"""`trainyard logs JOB --tail N` (the API's ``tail``) against a real server: the last lines of an ended job's
log, and with -f the last lines of a running one and then what it prints next."""

import subprocess
import sys

import httpx
import pytest

from tests.e2e.helpers import py_job, until

pytestmark = pytest.mark.slow


def test_tail_prints_the_last_lines_of_a_long_log_and_zero_prints_none(server):
    c = server.client()
    job = c.submit(py_job("import sys\nfor i in range(1, 20001): print('line', i)\nsys.stdout.write('no break')",
                          name="tail-long"))
    assert job.wait().status.value == "succeeded"

    r = server.cli("logs", job.id, "--tail", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["line 19999", "line 20000", "no break"]
    assert job.logs(tail=1) == "no break"
    none = server.cli("logs", job.id, "-n", "0")
    assert none.returncode == 0 and none.stdout == ""
    for bad in ("-1", "100001", "x"):
        r = server.cli("logs", job.id, "--tail", bad)
        assert r.returncode == 2 and "--tail" in r.stderr, (bad, r.stderr)


def test_tail_with_follow_prints_the_last_lines_then_what_comes_after(server, tmp_path):
    gate = tmp_path / "go"
    c = server.client()
    code = (f"import os, time\nfor i in range(5): print('early', i, flush=True)\n"
            f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)\nprint('late', flush=True)")
    job = c.submit(py_job(code, name="tail-follow"))
    until(lambda: "early 4" in job.logs())
    follow = subprocess.Popen([sys.executable, "-m", "trainyard", "logs", job.id, "-n", "2", "-f"],
                              env={**server.env, "TRAINYARD_SERVER": server.url}, stdout=subprocess.PIPE, text=True)
    try:
        assert follow.stdout.readline() == "early 3\n"
        assert follow.stdout.readline() == "early 4\n"
        gate.touch()
        assert follow.stdout.readline() == "late\n"
        assert follow.wait(60) == 0
    finally:
        follow.kill()


def test_the_api_refuses_a_tail_after_a_cursor_naming_the_field(server):
    c = server.client()
    job = c.submit({"name": "tail-api", "command": "echo hi"})
    job.wait()
    r = httpx.get(f"{server.url}/api/v1/jobs/{job.id}/logs", params={"tail": 2, "after": 1},
                  headers={"Authorization": f"Bearer {server.token}"})
    assert r.status_code == 422 and r.json()["details"]["errors"][0]["field"] == "tail"
    page = httpx.get(f"{server.url}/api/v1/jobs/{job.id}/logs", params={"tail": 5},
                     headers={"Authorization": f"Bearer {server.token}"}).json()
    assert [ch["data"] for ch in page["chunks"]] == ["hi\n"] and page["cursor"] > 0
