"""A code snapshot's digest, which a job's spec shows, lets no one else use the code: a caller uses a snapshot it
uploaded (the upload checked against the digest even when the code is stored already) or one a job it sees ran;
to anyone else it is as if it were not there, in HEAD as at submit, for jobs, sweeps and pipelines alike."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from tests.support.inprocess import in_process
from trainyard.errors import InvalidSpec
from trainyard.sdk.client import Client
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]


def snapshot(text: bytes) -> tuple[bytes, str]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.py")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    blob = buf.getvalue()
    return blob, "sha256:" + hashlib.sha256(blob).hexdigest()


def test_a_digest_alone_lets_no_other_team_use_the_code(db_url, tmp_path):
    with in_process(db_url, tmp_path / "home", NODES, auth=True) as e:
        users, secrets = {}, {}
        for user, team in (("alice", "cv"), ("bob", "nlp"), ("carol", "cv")):
            if user != "carol":
                e.sdk.create_queue({"name": f"{team}-q", "team": team})
            secrets[user] = e.sdk.identity.create_user(user, team=team, role="member").token.secret
            users[user] = Client("http://testserver", token=secrets[user], transport=e.tc._transport)

        def call(user, method, path, **kw):
            return e.tc.request(method, path, headers={"Authorization": f"Bearer {secrets[user]}"}, **kw)

        blob, digest = snapshot(b"API_KEY = 'cv-team-secret'\n")
        assert call("alice", "HEAD", f"/api/v1/snapshots/{digest}").status_code == 404
        assert call("alice", "PUT", f"/api/v1/snapshots/{digest}", content=blob).status_code == 201
        assert call("alice", "HEAD", f"/api/v1/snapshots/{digest}").status_code == 200
        job = {"command": "python train.py", "workdir": "."}
        ran = call("alice", "POST", "/api/v1/jobs", json={"spec": {**job, "queue": "cv-q"}, "snapshot": digest})
        assert ran.status_code == 201, ran.text

        # bob has the digest (say, from a log) but not the code: as if it were not there
        assert call("bob", "HEAD", f"/api/v1/snapshots/{digest}").status_code == 404
        for path, body in (("/api/v1/jobs", {"spec": {**job, "queue": "nlp-q"}, "snapshot": digest}),
                           ("/api/v1/sweeps", {"spec": {"name": "s", "job": {**job, "queue": "nlp-q", "command":
                            "python train.py {{params.a}}"}, "parameters": {"a": {"values": [1]}},
                            "metric": {"name": "acc"}}, "snapshot": digest}),
                           ("/api/v1/pipelines", {"spec": {"steps": {"a": {**job, "queue": "nlp-q"}}},
                                                  "workdirs": {".": digest}})):
            r = call("bob", "POST", path, json=body)
            assert r.status_code == 422 and f"snapshot {digest} was not uploaded" in r.text, (path, r.text)
        # nor can he claim it with other bytes; with the code itself he may (he has it, as alice has)
        assert call("bob", "PUT", f"/api/v1/snapshots/{digest}", content=b"not the code").status_code == 422
        assert call("bob", "HEAD", f"/api/v1/snapshots/{digest}").status_code == 404
        assert call("bob", "PUT", f"/api/v1/snapshots/{digest}", content=blob).status_code == 201
        again = call("bob", "POST", "/api/v1/jobs", json={"spec": {**job, "queue": "nlp-q"}, "snapshot": digest})
        assert again.status_code == 201, again.text

        # carol, alice's teammate, re-runs alice's job without uploading anything: she sees the job that ran it
        assert call("carol", "HEAD", f"/api/v1/snapshots/{digest}").status_code == 200
        assert users["carol"].rerun(ran.json()["id"]).info.snapshot == digest


def test_a_viewers_upload_is_refused_saying_its_role_submits_nothing(tmp_path):
    # given vic, a viewer of cv, running `trainyard run -- CMD` (which packs the folder before it submits)
    with in_process(f"sqlite:///{tmp_path / 'db'}", tmp_path / "home", NODES, auth=True) as e:
        secret = e.sdk.identity.create_user("vic", team="cv", role="viewer").token.secret
        blob, digest = snapshot(b"print(1)\n")
        r = e.tc.put(f"/api/v1/snapshots/{digest}", content=blob, headers={"Authorization": f"Bearer {secret}"})
    # then the refusal says why in the words a refused submit uses: the role, not the upload
    assert r.status_code == 403
    assert "your role does not allow submitting jobs (a viewer reads only)" in r.json()["message"], r.text
