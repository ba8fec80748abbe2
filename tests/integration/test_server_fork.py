"""The tests' forked servers (tests/support/server_fork.py) are what `python -m trainyard server` starts.

Most e2e tests run on them; what would differ if the fork got something wrong is checked here against
the servers and jobs themselves: the environment, folder, session and log a server runs with, what
its jobs inherit, and how it ends.
"""

from __future__ import annotations

import os
import signal

import psutil

from tests.support.servers import ServerProcess
from tests.support.server_fork import ForkedProcess


def test_a_forked_server_runs_in_its_own_session_environment_and_folder_and_its_jobs_inherit_them(
        tmp_path, monkeypatch):
    srv = ServerProcess(tmp_path / "home", ["--cpus", "1", "--memory", "1Gi", "--container-runtime", "none"])
    srv.extra_env = {"TRAINYARD_TEST_FORK_MARK": "marked"}
    monkeypatch.chdir(tmp_path)
    srv.start()
    monkeypatch.undo()
    try:
        assert isinstance(srv.proc, ForkedProcess)
        server = psutil.Process(srv.proc.pid)
        assert os.getsid(server.pid) == server.pid  # its own session: a test's kill of its group is its own
        assert server.cwd() == str(tmp_path)
        assert "trainyard server on http://127.0.0.1" in srv.log_path.read_text()
        c = srv.client()
        job = c.wait(c.submit({"name": "env", "command": "echo home=$TRAINYARD_HOME",
                               "resources": {"cpu": 0.1, "memory": "64Mi"}}).id, timeout=60)
        assert job.status == "succeeded", job
        assert f"home={srv.home}" in "".join(chunk.data for chunk in c.logs(job.id))
        launchers = [p for p in server.children(recursive=True) if "trainyard.launch" in " ".join(p.cmdline())]
        assert launchers and all(p.environ().get("TRAINYARD_TEST_FORK_MARK") == "marked" for p in launchers)
    finally:
        srv.stop_all()
    assert srv.proc.returncode == 0, srv.log_path.read_text()[-2000:]  # SIGTERM: a clean stop, as exec'd


def test_a_killed_forked_server_reads_as_killed_and_a_second_wait_agrees(tmp_path):
    srv = ServerProcess(tmp_path / "home", ["--cpus", "1", "--memory", "1Gi", "--container-runtime", "none"])
    srv.start()
    assert srv.proc.poll() is None
    srv.kill()
    assert srv.proc.returncode == -signal.SIGKILL
    assert srv.proc.wait(1) == -signal.SIGKILL
    assert not psutil.pid_exists(srv.proc.pid)  # reaped, not left a zombie
    srv.stop_all()
