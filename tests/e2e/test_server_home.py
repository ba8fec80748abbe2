"""One server per home: a second is refused with the first's address, and the CLI waits for a
server that is starting instead of starting a rival."""

import json
import os
import subprocess
import sys

import httpx
import psutil
import pytest

from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow


def cli(home, *args, timeout=60):
    env = {**os.environ, "TRAINYARD_HOME": str(home)}
    for key in ("TRAINYARD_SERVER", "TRAINYARD_TOKEN"):
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", "trainyard", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def servers_of(home) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if p.info["cmdline"][1:4] == ["-m", "trainyard", "server"] and p.environ().get("TRAINYARD_HOME") == str(home):
                found.append(p)
        except (psutil.Error, TypeError):
            pass
    return found


def test_a_second_server_on_the_same_home_is_refused_with_the_first_ones_address(tmp_path):
    first = ServerProcess(tmp_path / "home", ["--cpus", "1"])
    first.start()
    try:
        second = cli(tmp_path / "home", "server", "--cpus", "2")
        assert second.returncode == 1
        assert "another trainyard server holds" in second.stderr and first.url in second.stderr
        assert json.loads((tmp_path / "home" / "server.json").read_text())["pid"] == first.proc.pid
        assert first.client().nodes()[0].cpu == 1
    finally:
        first.stop_all()


def test_the_cli_waits_for_a_server_that_is_starting_instead_of_starting_another(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "TRAINYARD_HOME": str(home)}
    env.pop("TRAINYARD_SERVER", None)
    # given a server started by hand, and at once (while it starts) a command that needs a server
    started = subprocess.Popen([sys.executable, "-m", "trainyard", "server", "--cpus", "1"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        nodes = cli(home, "nodes", "-o", "json")
        # then the command used that server: its declared capacity, its address, no second server
        assert nodes.returncode == 0, nodes.stderr
        assert json.loads(nodes.stdout)[0]["cpu"] == 1
        assert json.loads((home / "server.json").read_text())["pid"] == started.pid
        assert [p.pid for p in servers_of(home)] == [started.pid]
    finally:
        started.terminate()
        started.wait(20)


# stops `trainyard server` where it takes its home's lock, and says which heavy modules it had loaded by then
AT_THE_LOCK = """
import sys
import trainyard.home

def acquire(self, shared=False):
    heavy = ("sqlalchemy", "fastapi", "uvicorn", "trainyard.api", "trainyard.store")
    print(sorted(m for m in heavy if m in sys.modules))
    raise SystemExit(0)

trainyard.home.HomeLock.acquire = acquire
sys.argv = ["trainyard", "server", "--cpus", "1"]
from trainyard.cli.entry import main
main()
"""


def test_the_server_holds_its_home_before_it_loads_the_web_and_database_stack(tmp_path):
    # those imports took ~1.2 s, more on a loaded machine: a CLI started beside the server found the home free
    # and started a rival in the background, which could take the home first
    env = {**os.environ, "TRAINYARD_HOME": str(tmp_path / "home")}
    env.pop("TRAINYARD_SERVER", None)
    r = subprocess.run([sys.executable, "-c", AT_THE_LOCK], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_the_home_and_its_secrets_are_private_to_the_user(tmp_path):
    srv = ServerProcess(tmp_path / "home")
    srv.start()
    try:
        assert (srv.home.stat().st_mode & 0o777) == 0o700
        assert ((srv.home / "token").stat().st_mode & 0o777) == 0o600
        assert ((srv.home / "server.json").stat().st_mode & 0o777) == 0o600
        # the CLI of the same user finds the server and its token with nothing set
        assert cli(srv.home, "ls").returncode == 0
    finally:
        srv.stop_all()


def test_a_job_another_process_writes_to_the_servers_database_is_listed_on_the_next_read(tmp_path):
    from trainyard.spec import parse_job
    from trainyard.store import Store

    srv = ServerProcess(tmp_path / "home", ["--cpus", "1"])
    srv.start()
    other = Store(f"sqlite:///{srv.home / 'trainyard.db'}", run_migrations=False)
    try:
        client = srv.client()
        # given the server's first page, read and kept (nothing written since)
        assert client.jobs().items == []
        # when another process (this test's, through a Store of its own) writes a job to the file
        theirs = other.create_job(parse_job("name: theirs\ncommand: sleep 60\nresources: {cpu: 1}"))
        # then the server's very next listing has it: its kept page was not served
        assert [j.id for j in client.jobs().items] == [theirs.id]
        mine = client.submit(parse_job("name: mine\ncommand: sleep 60\nresources: {cpu: 1}"))
        assert [j["id"] for j in httpx.get(srv.url + "/api/v1/jobs", headers=srv.headers).json()["items"]] \
            == [mine.id, theirs.id]
    finally:
        other.close()
        srv.stop_all()
