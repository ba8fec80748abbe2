"""The secrets service's rules on SQLite and PostgreSQL, through the API with a fake engine: a team holds at most
MAX_PER_TEAM secrets (replacing one is always allowed), `?team=-` names the admins' own, and the launcher's read is
refused once its attempt has ended."""

from __future__ import annotations

from tests.integration.test_api import env, report  # noqa: F401  (the fixture)
from tests.support.waiting import until
from trainyard.services import secrets


def test_a_team_holds_at_most_its_share_and_a_replace_still_goes(env, monkeypatch):  # noqa: F811
    tc, sdk, engine, platform = env
    monkeypatch.setattr(secrets, "MAX_PER_TEAM", 2)
    for name in ("a", "b"):
        assert tc.put(f"/api/v1/secrets/{name}", json={"value": "v"}).status_code == 200
    full = tc.put("/api/v1/secrets/c", json={"value": "v"})
    assert full.status_code == 409 and "2 secrets, the most a team may hold" in full.json()["message"]
    assert tc.put("/api/v1/secrets/a", json={"value": "new"}).status_code == 200  # a replace adds no row
    assert [s["name"] for s in tc.get("/api/v1/secrets", params={"team": "-"}).json()] == ["a", "b"]


def test_the_launchers_read_ends_with_its_attempt(env):  # noqa: F811
    tc, sdk, engine, platform = env
    tc.put("/api/v1/secrets/k", json={"value": "the-value"})
    job = sdk.submit({"name": "j", "command": "true", "secrets": {"K": "k"}})
    attempt = until(lambda: next((a for a in engine.launched if a.startswith(job.id)), None))
    read = tc.post(f"/internal/attempts/{attempt}/secrets", headers=engine.launcher_headers(attempt))
    assert read.status_code == 200 and read.json() == {"env": {"K": "the-value"}}
    report(tc, engine, attempt, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    ended = tc.post(f"/internal/attempts/{attempt}/secrets", headers=engine.launcher_headers(attempt))
    assert ended.status_code == 403 and "the-value" not in ended.text


def test_a_key_rotation_reseals_dask_clusters_tls_identities_too(tmp_path):
    from cryptography.fernet import Fernet

    from tests.support.inprocess import in_process
    from trainyard.spec.cluster import ClusterSpec
    from trainyard.spec.records import NodeInfo

    with in_process(f"sqlite:///{tmp_path / 'db'}", tmp_path / "home", [NodeInfo(name="a", cpu=8, memory=2**33)]) as e:
        dask = e.platform.dask
        cid = dask.create(ClusterSpec.model_validate({"name": "etl", "workers": 0})).id  # sealed with the first key
        key_file = e.platform.secrets.box.key_file
        new = Fernet.generate_key().decode()
        key_file.write_text(new + "\n" + key_file.read_text())
        assert e.platform.secrets.rotate()["resealed"] >= 1
        key_file.write_text(new + "\n")  # the old key dropped, as README says to once all is re-sealed
        e.platform.secrets.box.reload()
        row = dask.clusters.get(cid)
        assert dask.keys(row) is not None  # the old code left it sealed with the dropped key: unreadable


def test_a_key_rotation_reseals_service_replicas_tokens_too(tmp_path):
    from cryptography.fernet import Fernet

    from tests.support.inprocess import in_process
    from trainyard.services.service_tokens import ServiceTokens
    from trainyard.spec.records import NodeInfo

    with in_process(f"sqlite:///{tmp_path / 'db'}", tmp_path / "home", [NodeInfo(name="a", cpu=8, memory=2**33)]) as e:
        serving = e.platform.serving
        sealed = serving.tokens.for_launch("j-web-1", None)
        serving.services.add_replica("s-web", "j-web", 1, address="127.0.0.1:1", token=sealed)
        token = serving.token_env("j-web")["TRAINYARD_SERVICE_TOKEN"]
        assert serving.tokens.for_launch("j-web-1", sealed) == sealed  # launched again: the token it runs with
        assert serving.tokens.token(serving.tokens.for_launch("j-web-2", sealed)) != token  # a new attempt's own
        assert serving.token_env("j-other") == {}
        key_file = e.platform.secrets.box.key_file
        new = Fernet.generate_key().decode()
        key_file.write_text(new + "\n" + key_file.read_text())
        assert e.platform.secrets.rotate()["resealed"] >= 1
        key_file.write_text(new + "\n")  # the old key dropped
        e.platform.secrets.box.reload()
        fresh = ServiceTokens(e.platform.secrets.box)  # what another server, or this one restarted, opens it with
        assert fresh.token(serving.services.replica_token("j-web")) == token
