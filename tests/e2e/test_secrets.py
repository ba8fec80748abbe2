"""Secrets against a real `trainyard server`, on SQLite and PostgreSQL: a maintainer sets one from standard
input, a member's job reads it from its environment, its log shows stars where it was printed, and nothing the
server writes (database, launch.json, audit, API answers) holds the value; another team can neither see nor use
it; a deleted one refuses new jobs and fails an attempt not yet started, saying why."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.e2e import test_identity as identity
from tests.e2e.helpers import py_job, until
from tests.support.servers import ServerProcess
from trainyard.store.db import normalize_url

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
VALUE = "wb-7Hq2-" + "x9" * 12  # what a W&B key looks like: long, unlike any word of a log
# prints the value three ways (whole, in a sentence, split across two writes of one line) and keeps it in a file
SHOW = py_job("import os, pathlib, sys; v = os.environ['WANDB_KEY']; print(v); print('key is', v, 'ok');"
              "sys.stdout.write(v[:5]); sys.stdout.flush(); sys.stdout.write(v[5:] + '\\n');"
              "pathlib.Path(os.environ['TRAINYARD_OUTPUT_DIR'], 'seen.txt').write_text(v)",
              name="shows-key", secrets={"WANDB_KEY": "wandb"})


class As(identity.As):
    """Raw HTTP and the CLI as one user."""

    def __init__(self, srv: ServerProcess, token: str) -> None:
        super().__init__(srv, token)
        self.token, self.srv = token, srv

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        env = {**self.srv.env, "TRAINYARD_SERVER": self.srv.url, "TRAINYARD_TOKEN": self.token}
        return subprocess.run([sys.executable, "-m", "trainyard", *args], env=env, input=stdin or "",
                              capture_output=True, text=True, timeout=120)

    def run(self, spec: dict) -> dict:
        job = self.submit(spec)
        assert job.status_code == 201, job.text
        return self.http.get(f"/api/v1/jobs/{job.json()['id']}/wait", params={"timeout": 90}).json()

    def log(self, job_id: str) -> str:
        return "".join(c["data"] for c in self.http.get(f"/api/v1/jobs/{job_id}/logs").json()["chunks"])


@pytest.fixture
def srv(tmp_path, db_url):
    s = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "2", "--memory", "4Gi"], db=db_url)
    s.start()
    s.db_url = db_url
    yield s
    s.stop_all()


def test_a_team_secret_reaches_its_jobs_and_nothing_else(srv):
    admin = As(srv, (srv.home / "first-admin-token").read_text().strip())
    tokens = {}
    for name, team, role in [("alice", "vision", "member"), ("dave", "vision", "maintainer"), ("bob", "nlp", "member")]:
        made = admin.cli("admin", "user", "create", name, "--team", team, "--role", role)
        assert made.returncode == 0, made.stderr
        tokens[name] = made.stdout.strip().splitlines()[-1]
    alice, dave, bob = (As(srv, tokens[n]) for n in ("alice", "dave", "bob"))
    for q, team in (("vision-q", "vision"), ("nlp-q", "nlp")):
        assert admin.cli("queue", "create", q, "--team", team).returncode == 0

    # a member may not set one; a maintainer pipes it in (never on the command line)
    refused = alice.cli("secret", "set", "wandb", stdin=VALUE + "\n")
    assert refused.returncode == 1 and "maintainers do" in refused.stderr
    done = dave.cli("secret", "set", "wandb", stdin=VALUE + "\n")
    assert done.returncode == 0, done.stderr
    assert "secret wandb of team vision set (32 characters)" in done.stderr
    listed = json.loads(alice.cli("secret", "ls", "-o", "json").stdout)
    assert [(s["name"], s["team"], s["length"], s["updated_by"]) for s in listed] == [("wandb", "vision", 32, "dave")]
    assert VALUE not in json.dumps(listed)
    # another team sees nothing of it, and cannot name it
    assert json.loads(bob.cli("secret", "ls", "-o", "json").stdout) == []
    assert bob.get("/api/v1/secrets", params={"team": "vision"}).status_code == 404
    assert bob.get("/api/v1/secrets/wandb", params={"team": "vision"}).status_code == 404
    assert bob.put("/api/v1/secrets/wandb", params={"team": "vision"}, json={"value": "x"}).status_code == 403
    assert dave.get("/api/v1/secrets", params={"team": "-"}).status_code == 403  # no team: admins' only
    assert dave.post("/api/v1/secrets/rotate").status_code == 403
    theirs = bob.post("/api/v1/jobs", json={"spec": {**SHOW, "queue": "nlp-q"}})
    assert theirs.status_code == 422 and theirs.json()["details"]["errors"][0]["field"] == "secrets.WANDB_KEY"

    # the member's job reads it; its log shows stars wherever it was printed, its own file has the value
    job = alice.run({**SHOW, "queue": "vision-q"})
    assert job["status"] == "succeeded", alice.log(job["id"])
    log = alice.log(job["id"])
    stars = "*" * len(VALUE)
    assert log.splitlines() == [stars, f"key is {stars} ok", stars] and VALUE[:8] not in log
    assert alice.get(f"/api/v1/jobs/{job['id']}/outputs/seen.txt").text == VALUE

    # nothing the server keeps holds the value: launch.json, the audit log, the database (sealed under a 0600 key)
    launch = next(srv.home.glob(f"attempts/{job['id']}-1/r0/launch.json"))
    config = json.loads(launch.read_text())
    assert VALUE not in launch.read_text() and config["secrets"] == ["WANDB_KEY"]
    audit = admin.get("/api/v1/audit", params={"limit": 100}).json()
    assert any(a["action"] == "secret.set" and a["user"] == "dave" and a["target"] == "vision/wandb" for a in audit)
    [read] = [a for a in audit if a["action"] == "secret.read"]  # the launcher's read, as the job's owner's
    assert (read["user"], read["target"], read["detail"]["secrets"]) == ("alice", f"{job['id']}-1", ["wandb"])
    assert VALUE not in json.dumps(audit)
    assert stat.S_IMODE((srv.home / "secrets.key").stat().st_mode) == 0o600
    engine = sa.create_engine(normalize_url(srv.db_url))
    with engine.connect() as c:
        sealed = c.execute(sa.text("select sealed from secrets")).scalar_one()
        dumped = json.dumps([list(map(str, r)) for t in sa.inspect(c).get_table_names()
                             for r in c.execute(sa.text(f"select * from {t}"))])  # every table, every row
    engine.dispose()
    assert VALUE not in dumped and sealed.startswith("gAAAAA")  # a Fernet token
    # the launcher's way in is the attempt's own credential, and only while the attempt runs
    url = f"/internal/attempts/{job['id']}-1/secrets"
    assert httpx.post(srv.url + url, headers={"Authorization": "Bearer nope"}).status_code == 410
    ended = httpx.post(srv.url + url, headers={"Authorization": f"Bearer {config['token']}"})
    assert ended.status_code == 403 and VALUE not in ended.text
    assert alice.post(url).status_code in (401, 410)  # a user's token is not an attempt's

    # deleted: new jobs are refused, and one admitted before fails at its start saying why
    blocker = alice.post("/api/v1/jobs", json={"spec": py_job("import time; time.sleep(60)", name="blocker",
                                                               queue="vision-q", resources={"cpu": 2})}).json()["id"]
    until(lambda: alice.get(f"/api/v1/jobs/{blocker}").json()["status"] == "running", timeout=30)
    waiting = alice.post("/api/v1/jobs", json={"spec": {**SHOW, "queue": "vision-q"}}).json()["id"]
    assert dave.cli("secret", "rm", "wandb").returncode == 0
    refused = alice.post("/api/v1/jobs", json={"spec": {**SHOW, "queue": "vision-q"}})
    assert refused.status_code == 422 and "no secret 'wandb' in team vision" in refused.text
    alice.post(f"/api/v1/jobs/{blocker}/cancel")
    failed = alice.get(f"/api/v1/jobs/{waiting}/wait", params={"timeout": 60}).json()
    assert failed["status"] == "failed" and "no secret wandb in team vision" in alice.log(waiting)


def test_without_auth_a_file_secret_is_masked_line_by_line(tmp_path):
    # the embedded default: the local admin's secrets are of no team; a multi-line value from a file
    srv = ServerProcess(tmp_path / "home", ["--cpus", "2", "--memory", "2Gi"])
    srv.start()
    try:
        pem = "-----BEGIN KEY-----\n" + "\n".join(f"line{i}-" + "Zk4" * 10 for i in range(3)) + "\n-----END KEY-----\n"
        key_file = tmp_path / "key.pem"
        key_file.write_text(pem)
        made = srv.cli("secret", "set", "deploy-key", "--from-file", str(key_file))
        assert made.returncode == 0, made.stderr
        bad = srv.cli("secret", "set", "x", "--from-file", str(tmp_path / "missing"))
        assert bad.returncode == 2 and "--from-file" in bad.stderr
        with srv.client() as c:
            assert [s.name for s in c.secrets.list()] == ["deploy-key"] and c.secrets.list()[0].team is None
            job = c.submit(py_job("import os, time; k = os.environ['KEY']; print(k[:40], flush=True); time.sleep(0.3);"
                                  "print(k[40:]); print(os.environ['KEY'] == open(os.environ['KEY_FILE']).read())",
                                  name="pem", secrets={"KEY": "deploy-key"}, env_vars={"KEY_FILE": str(key_file)}))
            done = c.wait(job.id, timeout=60)
            log = "".join(chunk.data for chunk in c.logs(job.id))
        assert done.status.value == "succeeded", log
        assert log.rstrip().endswith("True")
        for line in pem.splitlines():
            assert line not in log  # each line of the value is masked, wherever the chunks were cut

        # the key rotated: a new key first, the old kept below; re-sealed; then the old one dropped
        from cryptography.fernet import Fernet

        key_path, new_key = srv.home / "secrets.key", Fernet.generate_key().decode()
        key_path.write_text(new_key + "\n" + key_path.read_text())
        rotated = srv.cli("secret", "rotate")
        assert rotated.returncode == 0 and "1 secret(s) re-sealed with the first of 2 key(s)" in rotated.stdout
        key_path.write_text(new_key + "\n")
        assert "0 secret(s) re-sealed with the first of 1 key(s)" in srv.cli("secret", "rotate").stdout
        with srv.client() as c:
            again = c.submit(py_job("import os; print(os.environ['KEY'] == open(os.environ['KEY_FILE']).read())",
                                    name="pem2", secrets={"KEY": "deploy-key"}, env_vars={"KEY_FILE": str(key_file)}))
            assert c.wait(again.id, timeout=60).status.value == "succeeded"
            assert "".join(chunk.data for chunk in c.logs(again.id)).strip() == "True"
    finally:
        srv.stop_all()


def test_bad_secret_requests_name_the_field(server):
    h = {"Authorization": f"Bearer {server.token}"}
    for path, body, field in [("/api/v1/secrets/bad name", {"value": "v"}, "name"),
                              ("/api/v1/secrets/ok?team=a%20b", {"value": "v"}, "team"),
                              ("/api/v1/secrets/ok", {"value": ""}, "value"),
                              ("/api/v1/secrets/ok", {"value": "v" * (64 * 1024 + 1)}, "value"),
                              ("/api/v1/secrets/ok", {"value": "a\x00b"}, "value"),
                              ("/api/v1/secrets/ok", {"valu": "v"}, "valu")]:
        r = httpx.put(server.url + path, json=body, headers=h)
        assert r.status_code == 422, (path, body, r.text)
        assert field in [e["field"] for e in r.json()["details"]["errors"]], r.text
    r = httpx.post(server.url + "/api/v1/jobs", headers=h,
                   json={"spec": {"command": "true", "secrets": {"PATH": "x"}}})
    assert r.status_code == 422 and "set by trainyard itself" in r.text
    assert httpx.get(server.url + "/api/v1/secrets", headers=h).json() == []
    # a pipeline step and a service naming a secret that does not exist are refused before anything runs
    from trainyard import errors

    with server.client() as c:
        with pytest.raises(errors.InvalidSpec) as e:
            c.pipelines.run({"name": "p", "steps": {"train": {"command": "true", "secrets": ["NOPE"]}}})
        assert [x["field"] for x in e.value.errors] == ["steps.train.secrets.NOPE"]
        with pytest.raises(errors.InvalidSpec) as e:
            c.services.apply({"name": "web", "command": "true", "secrets": {"K": "nope"}, "service": {"port": 8000}})
        assert [x["field"] for x in e.value.errors] == ["secrets.K"]
        assert c.pipelines.list().items == [] and c.services.list() == []
