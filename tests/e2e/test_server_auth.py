"""Who gets in: only requests with the token (the home's own by default), naming a Host the server
answers to; another Unix user on the same machine gets nothing, not even on loopback."""

import os
import re
import shutil
import ssl
import subprocess
import sys

import httpx
import pytest

from tests.conftest import need
from tests.e2e.helpers import py_job
from tests.support.certs import self_signed
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.slow
JOB = {"name": "x", "command": ["true"]}


def test_every_route_but_health_needs_the_bearer_token(server):
    for path in ("/api/v1/jobs", "/api/v1/nodes", "/docs", "/redoc", "/openapi.json"):
        assert httpx.get(server.url + path).status_code == 401, path
        assert httpx.get(server.url + path, headers={"Authorization": server.token}).status_code == 401, path
        assert httpx.get(server.url + path, headers={"Authorization": f"Basic {server.token}"}).status_code == 401
        assert httpx.get(server.url + path, headers={"Authorization": "Bearer nope"}).status_code == 401, path
        assert httpx.get(server.url + path, headers=server.headers).status_code == 200, path
    assert httpx.post(server.url + "/api/v1/jobs", json={"spec": JOB}).status_code == 401
    assert httpx.get(server.url + "/healthz").status_code == 200


def test_a_loopback_server_refuses_other_host_names(server):
    # a page whose name was re-pointed at 127.0.0.1 (DNS rebinding) sends its own name as Host
    r = httpx.post(server.url + "/api/v1/jobs", json={"spec": JOB}, headers={**server.headers, "Host": "evil.example"})
    assert r.status_code == 421 and r.json()["code"] == "misdirected_host"
    assert server.client().jobs().items == []
    for host in ("localhost", f"127.0.0.1:{server.url.rsplit(':', 1)[1]}"):
        assert httpx.get(server.url + "/api/v1/nodes", headers={**server.headers, "Host": host}).status_code == 200


def test_another_unix_user_can_neither_read_the_token_nor_submit(server, tmp_path):
    need(os.geteuid() == 0 and shutil.which("setpriv") and shutil.which("curl"),
         "needs root, setpriv and curl to act as another user")
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    read = subprocess.run([*nobody, "cat", str(server.home / "token")], capture_output=True, text=True)
    assert read.returncode != 0 and "Permission denied" in read.stderr
    post = subprocess.run([*nobody, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                           "-H", "Content-Type: application/json", "-d", '{"spec": {"name": "x", "command": ["id"]}}',
                           server.url + "/api/v1/jobs"], capture_output=True, text=True)
    assert post.stdout == "401"
    assert server.client().jobs().items == []


def test_token_on_the_command_line_is_refused_and_a_token_file_works(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "TRAINYARD_HOME": str(home)}
    refused = subprocess.run([sys.executable, "-m", "trainyard", "server", "--token", "s3cret"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "--token-file" in refused.stderr and not home.joinpath("server.json").exists()

    (tmp_path / "tok").write_text("s3cret-from-file\n")
    srv = ServerProcess(home, ["--token-file", str(tmp_path / "tok")])
    srv.start()
    try:
        assert httpx.get(srv.url + "/api/v1/jobs", headers={"Authorization": "Bearer s3cret-from-file"}).status_code == 200
        assert httpx.get(srv.url + "/api/v1/jobs", headers={"Authorization": "Bearer s3cret"}).status_code == 401
        assert not (home / "token").exists()  # the token given is the only one
    finally:
        srv.stop_all()


def test_the_server_token_never_reaches_a_job(tmp_path):
    home = tmp_path / "home"
    srv = ServerProcess(home)
    os.environ["TRAINYARD_SERVER_TOKEN"] = "env-s3cret"
    try:
        srv.start()
    finally:
        del os.environ["TRAINYARD_SERVER_TOKEN"]
    try:
        from trainyard.sdk.client import Client

        c = Client(srv.url, token="env-s3cret")
        job = c.submit(py_job("import os, pathlib\n"
                              "print(sorted(k for k in os.environ if 'TOKEN' in k))\n"
                              "print(pathlib.Path('../launch.json').read_text().count('env-' + 's3cret'))"))
        assert c.wait(job.id, timeout=60).status.value == "succeeded"
        assert job.logs().splitlines() == ["[]", "0"]
    finally:
        srv.stop_all()


def test_binding_beyond_loopback_without_auth_is_refused_with_how_to_enable_it(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "TRAINYARD_HOME": str(home)}
    refused = subprocess.run([sys.executable, "-m", "trainyard", "server", "--host", "0.0.0.0"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "without authentication" in refused.stderr and "--auth" in refused.stderr
    assert not (home / "server.json").exists()


def test_admin_bootstrap_prints_the_first_admins_token_last_and_only_once(tmp_path):
    # given a fresh home
    home = tmp_path / "home"
    env = {**os.environ, "TRAINYARD_HOME": str(home)}
    bootstrap = [sys.executable, "-m", "trainyard", "admin", "bootstrap"]
    # when the first admin is made before the server ever started
    made = subprocess.run(bootstrap, env=env, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    again = subprocess.run(bootstrap, env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "admin exists" in again.stderr and token not in again.stdout + again.stderr
    # then a server with --auth lets that token in as the admin, and makes no other
    srv = ServerProcess(home, ["--auth"])
    srv.start()
    try:
        me = httpx.get(srv.url + "/api/v1/whoami", headers={"Authorization": f"Bearer {token}"}).json()
        assert re.fullmatch(r"t-[0-9a-f]{12}", me.pop("token"))  # the bootstrap token is the admin's own
        assert me == {"user": "admin", "admin": True, "teams": {}, "users": True}
        assert not (home / "first-admin-token").exists()
        # and without --auth a user's token is nobody: only the server's own token gets in
    finally:
        srv.stop_all()
    plain = ServerProcess(home)
    plain.start()
    try:
        assert httpx.get(plain.url + "/api/v1/jobs", headers={"Authorization": f"Bearer {token}"}).status_code == 401
        assert httpx.get(plain.url + "/api/v1/whoami", headers=plain.headers).json()["user"] == "local"
    finally:
        plain.stop_all()


def test_tls_and_proxy_headers_only_from_the_proxies_named(tmp_path, monkeypatch):
    # given a self-signed certificate for 127.0.0.1 and a server that trusts proxy headers from loopback
    cert, key = self_signed(tmp_path, "IP:127.0.0.1,DNS:localhost")
    trust = ssl.create_default_context(cafile=str(cert))
    srv = ServerProcess(tmp_path / "home", ["--auth", "--tls-cert", str(cert), "--tls-key", str(key),
                                            "--forwarded-allow-ips", "127.0.0.1"], verify=trust)
    srv.start()
    try:
        # then it speaks HTTPS only, and a job's launcher reports back over it (trusting the server's certificate)
        assert srv.url.startswith("https://")
        with pytest.raises(httpx.HTTPError):
            httpx.get(srv.url.replace("https", "http") + "/healthz")
        from trainyard.errors import ServerUnavailable
        from trainyard.sdk.client import Client

        # and a client of another home trusts the certificate only when it is named
        monkeypatch.setenv("TRAINYARD_HOME", str(tmp_path / "client-home"))
        with pytest.raises(ServerUnavailable, match="does not trust"):
            Client(srv.url, token=srv.token).jobs()
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert Client(srv.url, token=srv.token).jobs().items == []
        monkeypatch.delenv("SSL_CERT_FILE")
        c = Client(srv.url, token=srv.token, transport=httpx.HTTPTransport(verify=trust))
        job = c.submit(py_job("print('over tls')"))
        assert c.wait(job.id, timeout=60).status.value == "succeeded" and "over tls" in job.logs()
        # and the client address the proxy names is the one the audit log records
        with httpx.Client(base_url=srv.url, verify=trust, headers=srv.headers) as http:
            r = http.post("/api/v1/teams", json={"name": "vision"}, headers={"X-Forwarded-For": "203.0.113.7"})
            assert r.status_code == 201
            sources = {e["action"]: e["source"] for e in http.get("/api/v1/audit").json()}
        assert sources["team.create"] == "203.0.113.7" and sources["job.submit"] == "127.0.0.1"
    finally:
        srv.stop_all()


def test_a_url_of_the_wrong_scheme_names_the_one_the_server_speaks(tmp_path, server):
    cert, key = self_signed(tmp_path)
    tls = ServerProcess(tmp_path / "tls-home", ["--tls-cert", str(cert), "--tls-key", str(key)],
                        verify=ssl.create_default_context(cafile=str(cert)))
    tls.start()
    try:
        # given http:// to a server that speaks HTTPS (it closes the connection without a word)
        plain = tls.url.replace("https://", "http://")
        client = {"TRAINYARD_HOME": str(tmp_path / "client-home")}
        for r in (tls.cli("login", "--server", plain, stdin="a-token\n", env=client),
                  tls.cli("ls", env={**client, "TRAINYARD_SERVER": plain, "TRAINYARD_TOKEN": "a-token"})):
            # then the CLI says so, and the URL to use
            assert r.returncode == 1, r.stderr
            assert f"the server at {plain} did not answer HTTP: it speaks HTTPS; use {tls.url}" in r.stderr, r.stderr
    finally:
        tls.stop_all()
    # and https:// to a plain HTTP server (an SSL error) likewise
    r = server.cli("ls", env={"TRAINYARD_SERVER": server.url.replace("http://", "https://")})
    assert r.returncode == 1 and "did not answer HTTPS" in r.stderr and f"use {server.url}\n" in r.stderr, r.stderr
    # and a port where nothing listens is said as before
    r = server.cli("ls", env={"TRAINYARD_SERVER": "http://127.0.0.1:1"})
    assert r.returncode == 1 and "cannot reach the trainyard server at http://127.0.0.1:1" in r.stderr, r.stderr


def test_proxy_headers_are_ignored_unless_configured(server):
    r = httpx.post(server.url + "/api/v1/jobs", json={"spec": JOB}, headers={**server.headers,
                                                                            "X-Forwarded-For": "203.0.113.7"})
    assert r.status_code == 201
    [entry] = httpx.get(server.url + "/api/v1/audit", headers=server.headers).json()
    assert (entry["user"], entry["action"], entry["source"]) == ("local", "job.submit", "127.0.0.1")
