"""Users, teams, tokens and permissions against a real `trainyard server --auth`, on SQLite and PostgreSQL:
two teams each see only their own work, roles decide who submits and cancels, a revoked or expired
token gets 401 everywhere, tokens are kept only as hashes, and every change is in the audit log."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time

import httpx
import pytest
import sqlalchemy as sa

from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess
from trainyard.store.db import normalize_url

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
SLEEP = py_job("import time; time.sleep(120)", name="sleeper")
OUT = py_job("import os, pathlib; print('secret-log-line');"
             "pathlib.Path(os.environ['TRAINYARD_OUTPUT_DIR'], 'model.txt').write_text('weights')", name="writer")


class As:
    """Raw HTTP as one user."""

    def __init__(self, srv: ServerProcess, token: str) -> None:
        self.http = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self.http, name)

    def submit(self, spec: dict) -> httpx.Response:
        return self.http.post("/api/v1/jobs", json={"spec": spec})


def last_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture
def srv(tmp_path, db_url):
    s = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "4", "--memory", "4Gi"], db=db_url)
    s.start()
    s.db_url = db_url
    yield s
    s.stop_all()


def cli_as(srv: ServerProcess, token: str, *args: str) -> subprocess.CompletedProcess:
    env = {**srv.env, "TRAINYARD_SERVER": srv.url, "TRAINYARD_TOKEN": token}
    return subprocess.run([sys.executable, "-m", "trainyard", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_two_teams_roles_revocation_hashes_and_audit(srv):
    # given the first admin (made at the first start with --auth, its token in a 0600 file) and two teams
    first = srv.home / "first-admin-token"
    assert stat.S_IMODE(first.stat().st_mode) == 0o600
    admin = first.read_text().strip()
    assert admin not in srv.log_path.read_text()  # the server's log names the file, never the token
    me = As(srv, admin).get("/api/v1/whoami").json()
    assert me.pop("token").startswith("t-")  # a user's token, which the page that lists it can mark
    assert me == {"user": "admin", "admin": True, "teams": {}, "users": True}
    tokens = {}
    for name, team, role in [("alice", "vision", "member"), ("bob", "nlp", "member"),
                             ("carol", "vision", "viewer"), ("dave", "vision", "maintainer")]:
        tokens[name] = last_line(cli_as(srv, admin, "admin", "user", "create", name, "--team", team, "--role", role))
    alice, bob, carol, dave = (As(srv, tokens[n]) for n in ("alice", "bob", "carol", "dave"))
    for q, team in (("vision-q", "vision"), ("nlp-q", "nlp")):
        assert cli_as(srv, admin, "queue", "create", q, "--team", team).returncode == 0

    # when each team submits
    a_job = alice.submit({**SLEEP, "queue": "vision-q"}).json()["id"]
    b_job = bob.submit({**SLEEP, "queue": "nlp-q"}).json()["id"]
    b_out = bob.submit({**OUT, "queue": "nlp-q"}).json()["id"]
    assert bob.get(f"/api/v1/jobs/{b_out}/wait", params={"timeout": 60}).json()["status"] == "succeeded"
    assert alice.get(f"/api/v1/jobs/{a_job}").json()["owner"] == "alice"

    # then each sees only its team's jobs, logs and outputs; the other team's answer 404
    assert {j["id"] for j in alice.get("/api/v1/jobs").json()["items"]} == {a_job}
    assert {j["id"] for j in bob.get("/api/v1/jobs").json()["items"]} == {b_job, b_out}
    assert {j["id"] for j in carol.get("/api/v1/jobs").json()["items"]} == {a_job}  # a viewer reads its team's
    # every GET the API has under a job (read from its own schema, so a new endpoint is covered too)
    schema = bob.get("/openapi.json").json()["paths"]
    job_paths = [p.replace("{job_id}", b_out).replace("{path}", "model.txt").replace("{exec_id}", "1")
                 for p, ops in schema.items() if p.startswith("/api/v1/jobs/{job_id}") and "get" in ops]
    assert len(job_paths) >= 8, job_paths
    for path in (*job_paths, f"/api/v1/jobs/{b_out}/wait?timeout=0", f"/api/v1/jobs/{b_out}/logs?follow=true"):
        r = alice.get(path)
        assert r.status_code == 404 and "secret-log-line" not in r.text and "weights" not in r.text, path
    assert bob.get(f"/api/v1/jobs/{b_out}/outputs/model.txt").content == b"weights"
    assert [q["queue"]["name"] for q in alice.get("/api/v1/queues").json()] == ["vision-q"]

    # a member cannot cancel another team's job: 404, and it keeps running
    assert alice.post(f"/api/v1/jobs/{b_job}/cancel").status_code == 404
    until(lambda: bob.get(f"/api/v1/jobs/{b_job}").json()["status"] == "running", timeout=60)
    # nor a teammate's: 403; a maintainer may
    assert carol.post(f"/api/v1/jobs/{a_job}/cancel").status_code == 403
    assert dave.post(f"/api/v1/jobs/{a_job}/cancel").status_code == 200
    # a viewer cannot submit; nobody submits to another team's queue, and the error names the field
    assert carol.submit({**SLEEP, "queue": "vision-q"}).status_code == 403
    refused = alice.submit({**SLEEP, "queue": "nlp-q"})
    assert refused.status_code == 422 and refused.json()["details"]["errors"][0]["field"] == "queue"
    # a maintainer defines its team's queues, not another's; a member defines none
    assert dave.post("/api/v1/queues", json={"queue": {"name": "vision-big", "team": "vision"}}).status_code == 201
    other = dave.post("/api/v1/queues", json={"queue": {"name": "mine", "team": "nlp"}})
    assert other.status_code == 403 and other.json()["details"]["field"] == "team"
    assert alice.post("/api/v1/queues", json={"queue": {"name": "x", "team": "vision"}}).status_code == 403
    assert alice.delete("/api/v1/queues/nlp-q").status_code == 404
    # pipeline runs are the team's too
    run = bob.post("/api/v1/pipelines", json={"spec": {"steps": {"a": {"command": ["true"], "queue": "nlp-q"}}}})
    assert run.status_code == 201, run.text
    run_id = run.json()["id"]
    assert bob.get(f"/api/v1/pipelines/{run_id}/wait", params={"timeout": 60}).json()["status"] == "succeeded"
    assert alice.get(f"/api/v1/pipelines/{run_id}").status_code == 404
    assert alice.get(f"/api/v1/pipelines/{run_id}/events").status_code == 404
    assert alice.post(f"/api/v1/pipelines/{run_id}/retry").status_code == 404
    assert alice.get("/api/v1/pipelines").json()["items"] == []
    assert [r["owner"] for r in bob.get("/api/v1/pipelines").json()["items"]] == ["bob"]
    # and so are Dask clusters: another team's is not found, not listed, not deletable
    made = bob.post("/api/v1/clusters", json={"workers": 0, "queue": "nlp-q", "name": "bobs"})
    assert made.status_code == 201, made.text
    cluster = made.json()["id"]
    assert alice.get(f"/api/v1/clusters/{cluster}").status_code == 404
    assert alice.delete(f"/api/v1/clusters/{cluster}").status_code == 404
    assert alice.post(f"/api/v1/clusters/{cluster}/scale", json={"workers": 3}).status_code == 404
    assert alice.get("/api/v1/clusters").json()["items"] == []
    listed = bob.get("/api/v1/clusters").json()["items"]
    assert [(c["id"], c["owner"], c["team"]) for c in listed] == [(cluster, "bob", "nlp")]
    assert bob.delete(f"/api/v1/clusters/{cluster}").json()["status"] in ("stopping", "stopped")

    # tokens: a second one for alice, listed without its secret, then revoked: 401 on every route
    laptop = last_line(cli_as(srv, tokens["alice"], "token", "create", "--name", "laptop", "--expires", "90d"))
    listed = cli_as(srv, tokens["alice"], "token", "ls", "-o", "json")
    assert laptop not in listed.stdout and [t["name"] for t in json.loads(listed.stdout)] == ["first", "laptop"]
    laptop_id = json.loads(listed.stdout)[1]["id"]
    assert As(srv, laptop).get("/api/v1/whoami").json() | {"teams": None} == \
        {"user": "alice", "admin": False, "teams": None, "users": True, "token": laptop_id}
    assert cli_as(srv, tokens["alice"], "token", "revoke", laptop_id).returncode == 0
    # and bob's first token expires (set in the database: a test cannot wait the shortest lifetime)
    engine = sa.create_engine(normalize_url(srv.db_url))
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE api_tokens SET expires_at = :t WHERE \"user\" = 'bob'"), {"t": time.time() - 1})
    # (changed behind the server's back, as another server sharing the database would: seen within seconds)
    until(lambda: bob.get("/api/v1/whoami").status_code == 401, timeout=30)
    for dead in (laptop, tokens["bob"]):
        for method, path in [("GET", "/api/v1/jobs"), ("GET", f"/api/v1/jobs/{b_out}/logs"),
                             ("GET", f"/api/v1/jobs/{b_out}/outputs/model.txt"), ("GET", "/openapi.json"),
                             ("GET", "/docs"), ("POST", "/api/v1/jobs"), ("GET", "/api/v1/whoami"),
                             ("POST", "/api/v1/tokens")]:
            r = As(srv, dead).request(method, path, json={})
            assert r.status_code == 401 and dead not in r.text, (method, path)
    # a disabled user is out at once
    assert cli_as(srv, admin, "admin", "user", "disable", "carol").returncode == 0
    assert carol.get("/api/v1/jobs").status_code == 401

    # the database holds hashes, never a token
    with engine.connect() as conn:
        dump = "\n".join(str(row) for table in ("api_tokens", "users", "audit", "jobs")
                         for row in conn.execute(sa.text(f"SELECT * FROM {table}")))
    engine.dispose()
    for secret in [admin, laptop, *tokens.values()]:
        assert secret not in dump

    # and the audit log lists each change with its user
    entries = json.loads(cli_as(srv, admin, "audit", "-o", "json").stdout)
    seen = {(e["user"], e["action"], e["target"]) for e in entries}
    assert {("admin", "user.create", "alice"), ("admin", "queue.create", "vision-q"),
            ("alice", "job.submit", a_job), ("bob", "job.submit", b_job), ("dave", "job.cancel", a_job),
            ("alice", "token.create", laptop_id), ("alice", "token.revoke", laptop_id),
            ("admin", "user.disable", "carol"), ("dave", "queue.create", "vision-big"),
            ("bob", "pipeline.run", run_id), ("bob", "cluster.create", cluster), ("bob", "cluster.delete", cluster)} <= seen
    assert ("local", "admin.bootstrap", "admin") in seen  # the server itself, at its first start
    assert {e["source"] for e in entries if e["action"] != "admin.bootstrap"} == {"127.0.0.1"}
    mine = json.loads(cli_as(srv, tokens["alice"], "audit", "--user", "bob", "-o", "json").stdout)
    assert mine and {e["user"] for e in mine} == {"alice"}  # a member reads only its own entries
    assert json.loads(cli_as(srv, admin, "audit", "--user", "dave", "--since", "1h", "-o", "json").stdout)[0][
        "action"] == "job.cancel"


def test_a_members_priority_is_held_to_the_queues_max_priority_which_only_an_admin_raises(srv):
    # given bob, nlp's member, and nlp's maintainer mia, on the admin's queue nlp-q (no max_priority)
    admin = (srv.home / "first-admin-token").read_text().strip()
    bob, mia = (last_line(cli_as(srv, admin, "admin", "user", "create", n, "--team", "nlp", "--role", r))
                for n, r in (("bob", "member"), ("mia", "maintainer")))
    assert cli_as(srv, admin, "queue", "create", "nlp-q", "--team", "nlp").returncode == 0
    run = ("run", "--queue", "nlp-q", "--cpu", "0.1", "--memory", "64Mi", "--priority")
    # when bob gives his job the highest priority there is: the old server took it, ahead of every team's work
    top = cli_as(srv, bob, *run, "2147483647", "--", "true")
    assert top.returncode != 0 and "priority: 2147483647 is above normal (100)" in top.stderr, top.stderr
    assert "an admin raises it" in top.stderr
    # nor may mia raise the ceiling; the admin does
    raised = ("queue", "create", "nlp-q", "--team", "nlp", "--replace", "--max-priority", "high")
    refused = cli_as(srv, mia, *raised)
    assert refused.returncode != 0 and "max_priority: only an admin sets" in refused.stderr, refused.stderr
    assert cli_as(srv, admin, *raised).returncode == 0
    assert "high (200)" in cli_as(srv, bob, "queue", "show", "nlp-q").stdout
    # then bob's high job is taken, an urgent one is not
    assert cli_as(srv, bob, *run, "high", "--", "true").returncode == 0
    urgent = cli_as(srv, bob, *run, "urgent", "--", "true")
    assert urgent.returncode != 0 and "urgent (300) is above high (200), queue 'nlp-q''s max_priority" in urgent.stderr


def test_login_saves_a_private_file_the_cli_then_uses(srv, tmp_path):
    admin = (srv.home / "first-admin-token").read_text().strip()
    home = tmp_path / "laptop"
    env = {**os.environ, "TRAINYARD_HOME": str(home), "TRAINYARD_TOKEN": admin}
    env.pop("TRAINYARD_SERVER", None)
    run = lambda *a, **kw: subprocess.run([sys.executable, "-m", "trainyard", *a], capture_output=True,  # noqa: E731
                                          text=True, timeout=120, **kw)
    done = run("login", "--server", srv.url, env=env)
    assert done.returncode == 0 and "as admin" in done.stdout and admin not in done.stdout + done.stderr
    assert stat.S_IMODE((home / "login.json").stat().st_mode) == 0o600
    del env["TRAINYARD_TOKEN"]
    listed = run("ls", "-o", "json", env=env)  # no variable, no local server: the saved login
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    assert not (home / "server.json").exists()
    bad = run("login", "--server", srv.url, env=env, input="not-a-token\n")
    assert bad.returncode == 1 and "not-a-token" not in bad.stderr
    # a token the server does not take: the CLI says what to do about it, not only which header to send
    refused = run("ls", env={**env, "TRAINYARD_TOKEN": "revoked-or-mistyped"})
    assert refused.returncode == 1 and "hint:" in refused.stderr and "trainyard login" in refused.stderr, refused.stderr
    assert "TRAINYARD_TOKEN" in refused.stderr and "revoked-or-mistyped" not in refused.stderr


ISOLATED = """
import os, pathlib
out = pathlib.Path(os.environ['TRAINYARD_OUTPUT_DIR'])
(out / 'who.txt').write_text(str(os.getuid()))
pathlib.Path(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'ckpt').write_text('step 1')
for what, path in [('credential', '../launch.json'), ('home', os.environ['HOME_UNDER_TEST']),
                   ('database', os.environ['HOME_UNDER_TEST'] + '/trainyard.db'),
                   ('artifacts', os.environ['HOME_UNDER_TEST'] + '/artifacts')]:
    try:
        pathlib.Path(path).read_text() if what != 'home' and what != 'artifacts' else os.listdir(path)
        print(what, 'readable')
    except PermissionError:
        print(what, 'denied')
"""


def test_a_user_mapped_to_a_unix_account_runs_as_it_and_reads_nothing_else(tmp_path):
    import shutil
    import tempfile

    from tests.conftest import need

    need(os.geteuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv to switch accounts")
    # given a server run as root with --auth, in a home other accounts may pass through to their folders
    root = tempfile.mkdtemp(prefix="trainyard-iso-")
    os.chmod(root, 0o711)
    srv = ServerProcess(__import__("pathlib").Path(root) / "home", ["--auth", "--cpus", "2", "--memory", "2Gi"])
    srv.start()
    try:
        with httpx.Client(base_url=srv.url, headers=srv.headers, timeout=60) as admin:
            bad = admin.post("/api/v1/users", json={"name": "eve", "team": "vision", "os_user": "no-such-account"})
            assert bad.status_code == 422 and bad.json()["details"]["errors"][0]["field"] == "os_user"
            made = admin.post("/api/v1/users", json={"name": "alice", "team": "vision", "os_user": "nobody"}).json()
        alice = As(srv, made["token"]["secret"])
        # when alice's job runs
        spec = py_job(ISOLATED, env_vars={"HOME_UNDER_TEST": str(srv.home)})
        job = alice.submit(spec).json()["id"]
        done = alice.get(f"/api/v1/jobs/{job}/wait", params={"timeout": 60}).json()
        logs = "".join(c["data"] for c in alice.get(f"/api/v1/jobs/{job}/logs").json()["chunks"])
        # then it ran as nobody, wrote its outputs and checkpoint, and could read neither the attempt's
        # credential nor the server's home, database or artifacts
        assert done["status"] == "succeeded", logs
        assert alice.get(f"/api/v1/jobs/{job}/outputs/who.txt").text == "65534"
        assert logs.split() == ["credential", "denied", "home", "denied", "database", "denied", "artifacts", "denied"]
        ckpt = srv.home / "checkpoints" / job
        assert (ckpt.stat().st_uid, oct(ckpt.stat().st_mode & 0o777)) == (65534, "0o700")
        assert oct((srv.home / "trainyard.db").stat().st_mode & 0o777) == "0o600"
    finally:
        srv.stop_all()
        shutil.rmtree(root, ignore_errors=True)
