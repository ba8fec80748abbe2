"""A job is a service's replica, or a Dask cluster's scheduler, only when trainyard made it so: a job of another
team naming the service or the cluster in its own ``env_vars`` (``TRAINYARD_SERVICE``, ``TRAINYARD_DASK_ROLE`` and
``TRAINYARD_DASK_CLUSTER``) is launched as a plain job, and neither gets the service's traffic nor becomes the
address the cluster's workers and clients reach. In-process with the fake engine, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard import envvars
from trainyard.spec.cluster import ClusterSpec
from trainyard.spec.records import NodeInfo
from trainyard.spec.service import ScaleRequest, ServiceSpec

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]


def _env_of(e, job_id: str) -> dict[str, str]:  # noqa: ANN001
    [config, *_] = until(lambda: next((c for a, c in e.engine.launched.items() if a.startswith(job_id)), None),
                         timeout=10)
    return config.env


def test_a_job_naming_another_teams_service_or_cluster_in_its_env_is_neither_a_replica_nor_a_scheduler(db_url,
                                                                                                     tmp_path):
    with in_process(db_url, tmp_path / "home", NODES, auth=True) as e:
        for team in ("vision", "nlp"):
            e.sdk.create_queue({"name": f"{team}-q", "team": team})
        alice = e.sdk.identity.create_user("alice", team="vision", role="member").token.secret
        e.sdk.identity.create_user("bob", team="nlp", role="member")
        service = e.platform.serving.apply(ServiceSpec.model_validate(
            {"name": "web", "command": ["python", "app.py"], "queue": "nlp-q", "service": {"replicas": 0}}),
            on_behalf=("bob", "nlp"))
        spec = ClusterSpec.model_validate({"name": "etl", "queue": "nlp-q", "workers": 1})
        cluster = e.platform.dask.clusters.create(spec, owner="bob", team="nlp")
        e.platform.dask.clusters.set(cluster, address="tcp://10.0.0.5:8786")

        claims = {envvars.SERVICE: service.id, envvars.SERVICE_VERSION: "1", envvars.DASK_ROLE: "scheduler",
                  envvars.DASK_CLUSTER: cluster}
        r = e.tc.post("/api/v1/jobs", headers={"Authorization": f"Bearer {alice}"}, json={"spec": {
            "name": "claim", "command": "sleep 60", "queue": "vision-q", "resources": {"cpu": 1}, "env_vars": claims}})
        assert r.status_code == 201, r.text
        env = _env_of(e, r.json()["id"])
        assert envvars.SERVICE_PORT not in env and envvars.DASK_PORT not in env  # launched as a plain job
        assert e.platform.serving.get("web").replicas == []
        assert e.platform.dask.clusters.get(cluster)["address"] == "tcp://10.0.0.5:8786"

        # while the service's own replica is one
        e.platform.serving.scale("web", ScaleRequest(replicas=1))  # the server's own service loop starts it
        replica = until(lambda: e.platform.serving.get("web").replicas or None, timeout=10)[0]
        assert envvars.SERVICE_PORT in _env_of(e, replica.job_id)
