"""What a server records in its home's ``server.json`` beyond its address (the certificate it serves,
the database it uses: public facts, no secret) and what the home's CLI and SDK do with it."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import need
from tests.e2e.helpers import py_job
from tests.support.servers import ServerProcess
from trainyard.errors import ServerUnavailable

pytestmark = pytest.mark.slow
CHOSEN = ("SSL_CERT_FILE", "SSL_CERT_DIR", "TRAINYARD_SERVER", "TRAINYARD_TOKEN")


def self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`trainyard ARGS` as a user types it: the home, no server named, nothing chosen to trust."""
    base = {k: v for k, v in os.environ.items() if k not in CHOSEN}
    return subprocess.run([sys.executable, "-m", "trainyard", *args], env={**base, "TRAINYARD_HOME": str(home), **env},
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def tls_server(tmp_path):
    need(shutil.which("openssl") is not None, "needs openssl to make a certificate")
    cert, key = self_signed(tmp_path, "yard")
    # as README's "Users, teams and tokens" starts it (users, a self-signed certificate), on loopback only:
    # what the home's clients trust does not depend on the interface it listens on
    srv = ServerProcess(tmp_path / "home", ["--auth", "--host", "127.0.0.1", "--tls-cert", str(cert),
                                            "--tls-key", str(key)], verify=False)
    srv.start()
    yield srv, cert, key
    srv.stop_all()


def test_the_homes_cli_and_sdk_trust_the_certificate_its_server_serves(tls_server, tmp_path, monkeypatch):
    srv, cert, key = tls_server
    # given the server's record: private, naming the certificate and never the key or its contents
    record = srv.home / "server.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    info = json.loads(record.read_text())
    assert info["url"].startswith("https://127.0.0.1:") and info["tls_cert"] == str(cert)
    assert str(key) not in record.read_text() and "PRIVATE" not in record.read_text()
    # when the home's CLI asks it, with no SSL_CERT_FILE and no server named
    made = cli(srv.home, "admin", "user", "create", "alice", "--team", "vision")
    listed = cli(srv.home, "ls")
    spec = tmp_path / "job.yaml"  # self-contained: `run --wait` goes over http.client, not httpx
    spec.write_text(yaml.safe_dump(py_job("print('over tls')")))
    ran = cli(srv.home, "run", str(spec), "--wait")
    # then it answers
    assert made.returncode == 0, made.stderr
    assert len(made.stdout.strip().splitlines()[-1]) >= 32  # alice's token, last line
    assert listed.returncode == 0, listed.stderr
    assert ran.returncode == 0 and "succeeded" in ran.stderr, ran.stderr
    # and so does the SDK of that home
    for name in CHOSEN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRAINYARD_HOME", str(srv.home))
    from trainyard.sdk.client import Client

    assert {j.name for j in Client().jobs().items} == {"t"}
    from trainyard.sdk.quick import submit_and_wait  # raises NotQuick where its TLS check fails

    assert submit_and_wait(spec)["status"] == "succeeded"


def test_another_home_does_not_trust_it_and_says_which_certificate_problem(tls_server, tmp_path, monkeypatch):
    srv, cert, _ = tls_server
    # given a client of another home, pointed at the server
    other = tmp_path / "other"
    shown = cli(other, "ls", TRAINYARD_SERVER=srv.url, TRAINYARD_TOKEN=srv.token)
    # then it refuses the certificate, naming the problem and the fix
    assert shown.returncode != 0
    assert "certificate" in shown.stderr and "SSL_CERT_FILE" in shown.stderr and "self-signed" in shown.stderr
    for name in CHOSEN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRAINYARD_HOME", str(other))
    from trainyard.sdk.client import Client

    with pytest.raises(ServerUnavailable, match="does not trust"):
        Client(srv.url, token=srv.token).jobs()
    # and once the user names the certificate, it is trusted there too
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert Client(srv.url, token=srv.token).jobs().items == []


def test_what_the_user_chose_is_trusted_too_and_a_refusal_is_said_at_once(tls_server, tmp_path):
    srv, cert, _ = tls_server
    # given the home's own CLI, with the user's own bundle named (as many systems set it for every process)
    other_cert, _ = self_signed(tmp_path, "elsewhere")
    # then it trusts both: the home's certificate, and the user's
    assert cli(srv.home, "ls", SSL_CERT_FILE=str(other_cert)).returncode == 0
    # when the certificate file no longer is the one the server serves (replaced, the server not restarted)
    cert.write_bytes(other_cert.read_bytes())
    shown = cli(srv.home, "ls")
    # then, looking for the home's server (the discovery path, which used to wait 60 s), it says what is wrong
    assert shown.returncode != 0
    assert "does not trust" in shown.stderr and "did not answer" not in shown.stderr
    assert "server.log" not in shown.stderr


def test_a_holder_that_never_answers_names_no_log_it_did_not_write(tmp_path):
    from trainyard.home import HomeLock
    from trainyard.sdk.discovery import wait_for_holder

    # given a home held (as a foreground server starting holds it) with no server.log
    home = tmp_path / "home"
    home.mkdir()
    lock = HomeLock(home)
    lock.acquire()
    try:
        # then the wait ends naming no file that is not there
        with pytest.raises(ServerUnavailable) as caught:
            wait_for_holder(home, wait=0.3)
        assert "server.log" not in str(caught.value)
        # and names the log once there is one (a server started in the background)
        (home / "server.log").write_text("")
        with pytest.raises(ServerUnavailable, match="server.log"):
            wait_for_holder(home, wait=0.3)
    finally:
        lock.release()


@pytest.mark.postgres
def test_admin_bootstrap_without_db_refuses_a_home_whose_server_uses_postgresql(tmp_path, pg_url):
    # given a home whose server runs on PostgreSQL (a password in the URL, as a user may give it)
    with_password = pg_url.replace("trainyard@", "trainyard:hunter2-secret@")  # the fixture's server trusts anyone
    assert with_password != pg_url
    srv = ServerProcess(tmp_path / "home", db=with_password)
    srv.start()
    try:
        record = (srv.home / "server.json").read_text()
        recorded = json.loads(record)["db"]
        assert recorded.startswith("postgresql://127.0.0.1:") and recorded.endswith("/" + pg_url.rsplit("/", 1)[1])
        assert "hunter2" not in record and "trainyard@" not in record
        # when an admin is bootstrapped without --db
        refused = cli(srv.home, "admin", "bootstrap")
        # then it refuses, naming --db, and makes no stray SQLite database or token
        assert refused.returncode == 1 and "--db" in refused.stderr and recorded in refused.stderr
        assert not (srv.home / "trainyard.db").exists()
        # and with the server's --db it makes the admin as before
        made = cli(srv.home, "admin", "bootstrap", "--db", with_password)
        assert made.returncode == 0, made.stderr
        assert "first admin 'admin' created" in made.stdout and "hunter2" not in made.stdout + made.stderr
    finally:
        srv.stop_all()


def test_admin_bootstrap_with_a_db_the_homes_server_does_not_use_refuses_naming_db(tmp_path):
    # given a home whose server runs on the home's SQLite
    srv = ServerProcess(tmp_path / "home")
    srv.start()
    try:
        other = tmp_path / "elsewhere.db"
        # when an admin is bootstrapped for that home, but with --db naming another database
        refused = cli(srv.home, "admin", "bootstrap", "--db", f"sqlite:///{other}")
        # then it refuses, naming --db and the server's database, and makes no admin nowhere the server looks
        assert refused.returncode == 1, refused.stdout
        assert "--db" in refused.stderr and str(srv.home / "trainyard.db") in refused.stderr, refused.stderr
        assert not other.exists() and "ty_" not in refused.stdout
    finally:
        srv.stop_all()
