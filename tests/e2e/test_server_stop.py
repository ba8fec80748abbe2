"""How a real `trainyard server` stops: on SIGTERM it says so in its log, exits 0, and leaves running jobs running."""

import signal

import pytest

from tests.e2e.helpers import py_job, until

pytestmark = pytest.mark.slow


def test_sigterm_is_logged_and_exits_0_while_a_running_job_goes_on(server, tmp_path):
    # given a job that is running, and goes on to write a file once the server is gone
    flag, done = tmp_path / "flag", tmp_path / "done"
    job = server.client().submit(py_job(
        f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.05)\nopen({str(done)!r}, 'w')"))
    until(lambda: job.refresh().status.value == "running")
    # when the server gets SIGTERM
    server.proc.send_signal(signal.SIGTERM)
    code = server.proc.wait(20)
    # then it logged one line that says so, and exited 0 (a clean stop, not a death by the signal)
    log = server.log_path.read_text()
    stopping = [line for line in log.splitlines() if "got SIGTERM" in line]
    assert code == 0, log[-3000:]
    assert len(stopping) == 1 and "stopping; running jobs keep running" in stopping[0], log[-3000:]
    assert "Traceback" not in log
    # and the job, as the line says, ran on without it
    flag.touch()
    until(done.exists, timeout=20)
