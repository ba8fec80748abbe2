"""A listing into a pipe prints each row on one line; on an 80-column terminal it prints every id
whole, however long the other columns: the id is what
a user copies into the next command (`trainyard show JOB`, `trainyard token revoke t-…`). Real `trainyard`
processes against real servers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow
NARROW = {"COLUMNS": "80"}


def test_ls_prints_whole_job_ids_beside_a_long_name_and_a_long_pending_reason(server):
    c = server.client()
    busy = c.submit(py_job("import time; time.sleep(300)", name="busy-" + "x" * 40, resources={"cpu": 2}))
    waits = c.submit({"name": "waits-" + "y" * 40, "command": "true", "resources": {"cpu": 2, "gpu": 2}})
    until(lambda: c.get(waits.id).reason)

    listed = server.cli("ls", env=NARROW)

    assert listed.returncode == 0, listed.stderr
    assert busy.id in listed.stdout and waits.id in listed.stdout, listed.stdout
    # into a pipe with no COLUMNS, each job is one whole line, as grep and awk want it
    piped = server.cli("ls", env={"COLUMNS": ""})
    rows = piped.stdout.splitlines()[1:]
    assert rows and all(r.split()[0].startswith("j-") for r in rows), piped.stdout  # no row folded onto the next
    [line] = [x for x in rows if waits.id in x]
    assert "waits-" + "y" * 40 in line and len(line) > 120, piped.stdout


def test_token_ls_prints_whole_token_ids(tmp_path):
    srv = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "1", "--memory", "1Gi", "--container-runtime", "none"])
    srv.start()
    try:
        env = {**srv.env, "TRAINYARD_SERVER": srv.url, **NARROW,
               "TRAINYARD_TOKEN": (srv.home / "first-admin-token").read_text().strip()}

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "trainyard", *args], env=env, capture_output=True,
                                  text=True, timeout=120)

        made = cli("token", "create", "--name", "laptop", "--expires", "90d")
        assert made.returncode == 0, made.stderr
        token_id = made.stderr.split()[1]  # "token t-… ('laptop') of admin, expires …"

        listed = cli("token", "ls")

        assert listed.returncode == 0, listed.stderr
        assert token_id.startswith("t-") and token_id in listed.stdout, listed.stdout
        assert cli("token", "revoke", token_id).returncode == 0
    finally:
        srv.stop_all()
