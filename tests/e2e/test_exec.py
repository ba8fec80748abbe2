"""`trainyard exec JOB -- CMD` (``Client.exec``, ``POST /api/v1/jobs/{id}/exec``) against a real server: the
command runs beside the job's, in its work dir with its environment; its output and exit code come back, a
bad request is refused naming the field, and a viewer may not run anything."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.helpers import PY, until
from tests.e2e.test_identity import As, cli_as, last_line

pytestmark = pytest.mark.slow

HOLD = "import time\nprint('holding', flush=True)\ntime.sleep(600)"


def test_exec_runs_beside_the_job_and_says_how_it_ended(server):
    c = server.client()
    job = c.submit({"name": "held", "command": [PY, "-c", HOLD], "env_vars": {"STAGE": "warmup"},
                    "resources": {"cpu": 0.5}})
    until(lambda: "holding" in job.logs(), timeout=60)

    out = server.cli("exec", job.id, "--", "sh", "-c", "pwd; echo $STAGE $TRAINYARD_JOB_ID; exit 5")

    assert out.returncode == 5, out.stderr
    where, said = out.stdout.splitlines()
    assert where.endswith("/r0/work") and said == f"warmup {job.id}"
    got = job.exec(["ls"], timeout=10)  # the SDK, through the job's handle
    assert (got.status, got.exit_code, got.replica) == ("done", 0, 0) and got.requested_by == "local"
    late = server.cli("exec", job.id, "--timeout", "1", "--", "sleep", "20")
    assert late.returncode == 1 and "still running after 1s: stopped" in late.stderr
    missing = server.cli("exec", job.id, "--", "no-such-tool")
    assert missing.returncode == 1 and "cannot run 'no-such-tool'" in missing.stderr

    # what is refused, naming the field
    url = f"{server.url}/api/v1/jobs/{job.id}/exec"
    for body, field in (({"argv": []}, "argv"), ({"argv": [""]}, "argv"), ({"argv": ["a\x00b"]}, "argv"),
                        ({"argv": ["ls"], "timeout": 601}, "timeout"), ({"argv": ["ls"], "timeout": "nan"}, "timeout"),
                        ({"argv": ["ls"], "replica": 1.5}, "replica"), ({"argv": ["ls"], "shell": True}, "shell")):
        r = httpx.post(url, json=body, headers=server.headers)
        assert r.status_code == 422 and field in r.text, (body, r.text)
    other = server.cli("exec", job.id, "-r", "3", "--", "ls")
    assert other.returncode == 1 and f"replica 3 of job {job.id} is not running" in other.stderr
    assert httpx.get(f"{url}/{10**9}", headers=server.headers).status_code == 404
    c.cancel(job.id)
    c.wait(job.id, timeout=60)
    ended = server.cli("exec", job.id, "--", "ls")
    assert ended.returncode == 1 and f"job {job.id} has no running command (cancelled)" in ended.stderr


def test_a_viewer_may_not_run_commands_in_a_job(auth_server):
    admin = (auth_server.home / "first-admin-token").read_text().strip()
    tokens = {n: last_line(cli_as(auth_server, admin, "admin", "user", "create", n, "--team", "vision", "--role", r))
              for n, r in (("alice", "member"), ("carol", "viewer"))}
    assert cli_as(auth_server, admin, "queue", "create", "vision-q", "--team", "vision").returncode == 0
    alice, carol = As(auth_server, tokens["alice"]), As(auth_server, tokens["carol"])
    job = alice.submit({"name": "h", "command": [PY, "-c", HOLD], "queue": "vision-q",
                        "resources": {"cpu": 0.5}}).json()["id"]
    until(lambda: "holding" in alice.get(f"/api/v1/jobs/{job}/logs").text, timeout=60)

    refused = carol.post(f"/api/v1/jobs/{job}/exec", json={"argv": ["id"]})
    assert refused.status_code == 403 and "run commands in your own jobs only" in refused.json()["message"]
    ran = cli_as(auth_server, tokens["alice"], "exec", job, "--", "echo", "hi")
    assert ran.returncode == 0 and ran.stdout == "hi\n"
    audit = As(auth_server, admin).get("/api/v1/audit").json()
    assert [(e["user"], e["detail"]["argv"]) for e in audit if e["action"] == "job.exec"] == [("alice", ["echo", "hi"])]
    alice.post(f"/api/v1/jobs/{job}/cancel")


def test_a_command_runs_as_the_job_s_account_and_its_stacks_are_read(tmp_path):
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from tests.conftest import need
    from tests.support.servers import ServerProcess

    need(os.geteuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv to switch accounts")
    root = tempfile.mkdtemp(prefix="trainyard-iso-")
    os.chmod(root, 0o711)  # as test_identity's: other accounts pass through to their folders
    srv = ServerProcess(Path(root) / "home", ["--auth", "--cpus", "2", "--memory", "2Gi"])
    srv.start()
    try:
        with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as admin:
            made = admin.post("/api/v1/users", json={"name": "alice", "team": "vision", "os_user": "nobody"}).json()
        token = made["token"]["secret"]
        alice = As(srv, token)
        job = alice.submit({"name": "h", "command": [PY, "-c", HOLD], "resources": {"cpu": 0.5}}).json()["id"]
        until(lambda: "holding" in alice.get(f"/api/v1/jobs/{job}/logs").text, timeout=60)

        ran = cli_as(srv, token, "exec", job, "--", "id", "-u")  # not the launcher's root
        assert (ran.returncode, ran.stdout) == (0, "65534\n"), ran.stderr
        dumped = cli_as(srv, token, "stack", job)
        assert dumped.returncode == 0 and "<module> (<string>:3)" in dumped.stdout, dumped.stderr
        alice.post(f"/api/v1/jobs/{job}/cancel")
    finally:
        srv.stop_all()
        shutil.rmtree(root, ignore_errors=True)
