"""A real `trainyard server` started with a low soft limit on open files raises it to the hard limit (each caller's
connection and each kept-alive connection to a replica is a file), and the jobs it runs get the limit it was given."""

import resource
import socket
import sys

import httpx
import pytest

from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow
LOW = 256
# lowers the soft limit, then becomes the server: the same pid, as a shell's `ulimit -Sn 256; exec ...` would
WRAP = [sys.executable, "-c", "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({LOW}, resource.getrlimit(resource.RLIMIT_NOFILE)[1])); "
        "os.execv(sys.argv[1], sys.argv[1:])"]
SHOW = ("import os, resource; "
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], os.environ.get('TRAINYARD_NOFILE_SOFT'))")


def _soft(pid: int) -> int:
    line = next(x for x in open(f"/proc/{pid}/limits") if x.startswith("Max open files"))
    return int(line.split()[3])


def test_the_server_raises_its_open_file_limit_and_its_jobs_run_with_the_one_it_was_given(tmp_path):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    srv = ServerProcess(tmp_path / "home", wrapper=WRAP)
    srv.start()
    try:
        assert _soft(srv.proc.pid) == (1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)) > LOW
        assert "soft limit raised from 256" in srv.log_path.read_text()
        # more callers than the limit it was given: all are taken, and one more is answered
        port = int(srv.url.rsplit(":", 1)[1])
        callers = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(LOW + 100)]
        try:
            assert httpx.get(srv.url + "/healthz", timeout=10).status_code == 200
        finally:
            for s in callers:
                s.close()
        job = srv.client().submit({"name": "limits", "command": [sys.executable, "-c", SHOW]})
        info = job.wait(timeout=60)
        assert info.status.value == "succeeded", job.logs()
        assert job.logs().split() == [str(LOW), "None"]  # the job's own limit, and no trace of the server's note
    finally:
        srv.stop_all()
