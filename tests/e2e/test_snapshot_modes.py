"""A code snapshot keeps its files' owner permission bits: a key the user kept 0600 is 0600 in the job's copy, a
script they made executable runs; setuid, setgid and sticky bits are never kept."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from tests.conftest import need
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow

_SHOW = "import os\nfor n in sorted(os.listdir('.')):\n    print(n, oct(os.stat(n).st_mode & 0o7777))\n"


def _code(tmp_path):  # noqa: ANN001, ANN202
    work = tmp_path / "code"
    work.mkdir()
    (work / "show.py").write_text(_SHOW)
    for name, mode in (("key.pem", 0o600), ("run.sh", 0o755), ("shared.txt", 0o640), ("suid.sh", 0o4755),
                       ("readonly.txt", 0o400)):
        (work / name).write_text("#!/bin/sh\necho ran\n")
        os.chmod(work / name, mode)
    return work


def test_a_snapshot_keeps_its_files_owner_permission_bits(server, tmp_path):
    r = server.cli("run", "--wait", "show.py", cwd=_code(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    [job] = server.client().jobs().items
    seen = dict(line.split() for line in server.cli("logs", job.id).stdout.splitlines() if line.strip())
    assert seen["key.pem"] == "0o600" and seen["shared.txt"] == "0o640" and seen["run.sh"] == "0o755", seen
    assert seen["suid.sh"] == "0o755" and seen["readonly.txt"] == "0o400", seen  # no setuid in a job's copy
    assert not stat.S_IMODE(os.stat(tmp_path / "code" / "key.pem").st_mode) & 0o077  # the user's own file untouched


def test_a_job_run_as_an_account_reads_its_private_files_and_runs_its_scripts(tmp_path):
    need(os.geteuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv to switch accounts")
    root = Path(tempfile.mkdtemp(prefix="trainyard-osuser-"))
    os.chmod(root, 0o711)  # other accounts pass through to their folders, as to a server's home
    srv = ServerProcess(root / "home", ["--auth", "--cpus", "2", "--memory", "2Gi"])
    srv.start()
    try:
        with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as admin:
            assert admin.post("/api/v1/teams", json={"name": "vision"}).status_code in (200, 201)
            made = admin.post("/api/v1/users", json={"name": "alice", "team": "vision", "os_user": "nobody"}).json()
        env = {**srv.env, "TRAINYARD_SERVER": srv.url, "TRAINYARD_TOKEN": made["token"]["secret"]}
        run = subprocess.run([sys.executable, "-m", "trainyard", "run", "--wait", "--", "sh", "-c",
                              "id -u; python3 show.py; cat key.pem; ./run.sh"], cwd=_code(tmp_path), env=env,
                             capture_output=True, text=True, timeout=120)
        [job] = srv.client().jobs().items
        logs = srv.cli("logs", job.id).stdout
        assert run.returncode == 0, run.stdout + run.stderr + logs
        assert logs.startswith("65534\n") and "key.pem 0o600" in logs and "run.sh 0o755" in logs, logs
        assert "#!/bin/sh" in logs and "\nran\n" in logs, logs  # the account read its 0600 file, ran its script
    finally:
        srv.stop_all()
        shutil.rmtree(root, ignore_errors=True)
