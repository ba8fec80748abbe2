"""A job that uses the SDK and the CLI goes on working when the server that launched it dies and
another server sharing its database takes over: the job finds the new leader through
$TRAINYARD_SERVER_FILE, the address the servers announce beside the database."""

import pytest

from tests.e2e.helpers import PY, py_job, until
from tests.e2e.test_leader import two_servers_on_one_file

pytestmark = [pytest.mark.slow]


def job_using_the_sdk_after(marker) -> dict:
    """A job that waits for ``marker``, then reads itself, submits a child and runs `trainyard show`."""
    return py_job(
        "import os, pathlib, subprocess, sys, time\n"
        f"while not pathlib.Path({str(marker)!r}).exists():\n    time.sleep(0.1)\n"
        "from trainyard.sdk.client import Client\n"
        "me = os.environ['TRAINYARD_JOB_ID']\n"
        "c = Client()\n"
        "print('seen', c.get(me).status.value, flush=True)\n"
        f"child = c.submit({{'name': 'child', 'command': [{PY!r}, '-c', 'print(42)'],\n"
        "                   'resources': {'cpu': 0.1, 'memory': '64Mi'}})\n"
        "print('child', child.id, flush=True)\n"
        "shown = subprocess.run([sys.executable, '-m', 'trainyard', 'show', me], capture_output=True, text=True)\n"
        "print('show', shown.returncode, shown.stderr[-500:], flush=True)\n",
        name="parent", resources={"cpu": 0.1, "memory": "64Mi"})


def test_a_job_uses_the_sdk_against_the_new_leader_after_its_server_is_killed(tmp_path):
    marker = tmp_path / "go"
    first, second = two_servers_on_one_file(tmp_path)
    try:
        assert (first.role(), second.role()) == ("leader", "follower")
        c = second.client()
        parent = c.submit(job_using_the_sdk_after(marker))
        until(lambda: c.get(parent.id).status.value == "running", timeout=60)

        first.kill()  # the job's $TRAINYARD_SERVER is dead from here on
        until(lambda: second.role() == "leader", timeout=15)
        marker.touch()

        info = c.wait(parent.id, timeout=120)
        log = c.job(parent.id).logs()
        assert info.status.value == "succeeded", (info.status, info.reason, log)
        lines = log.splitlines()
        assert "seen running" in lines and any(line.startswith("show 0") for line in lines), log
        child_id = next(line.split()[1] for line in lines if line.startswith("child "))
        assert c.wait(child_id, timeout=90).status.value == "succeeded"
        assert c.job(child_id).logs() == "42\n"
        assert [j.id for j in c.jobs(name="child").items] == [child_id]  # submitted once
    finally:
        first.stop_all()
        second.stop_all()
