"""What a user made goes on making jobs in their name later (a sweep's trials, a pipeline run's next steps, a
service's replicas, a Dask cluster's workers): with ``--auth`` each such job asks whether its owner may still
submit it. Once alice is disabled, made a viewer or taken out of her team, none is created, and the sweep, run,
service or cluster says why. In-process with the fake engine, on SQLite and PostgreSQL; each test plays the
launcher of alice's first job."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.test_api import report
from tests.support.inprocess import InProcess, in_process
from tests.support.waiting import until
from trainyard.auth.permissions import LOCAL_ADMIN
from trainyard.services.dask_loop import Memory
from trainyard.spec.cluster import ClusterSpec
from trainyard.spec.records import NodeInfo

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]
JOB = {"queue": "vision-q", "resources": {"cpu": 1}}
# how alice loses the right to submit to vision-q, and the reason given for each
CHANGES = {
    "disabled": "its owner alice is disabled or gone",
    "viewer": "its owner alice may no longer submit to queue vision-q: your role in team vision does not allow",
    "removed": "its owner alice may no longer submit to queue vision-q: it is not one of their teams' queues",
}


@contextmanager
def vision(db_url: str, home: Path) -> Iterator[tuple[InProcess, dict[str, str]]]:
    """A server with users, a queue of team vision and alice, its member: (the server, alice's headers)."""
    with in_process(db_url, home, NODES, auth=True) as e:
        e.sdk.create_queue({"name": "vision-q", "team": "vision"})
        secret = e.sdk.identity.create_user("alice", team="vision", role="member").token.secret
        yield e, {"Authorization": f"Bearer {secret}"}


def take_rights(e: InProcess, change: str) -> None:
    if change == "disabled":
        e.sdk.identity.disable_user("alice")
    elif change == "viewer":
        e.sdk.identity.set_membership("alice", "vision", "viewer")
    else:  # the API takes no role None (MembershipSet); the service and store do
        e.platform.identity.set_membership(LOCAL_ADMIN, "alice", "vision", None)


def alices_jobs(e: InProcess) -> list[str]:
    items = e.tc.get("/api/v1/jobs", params={"limit": 500}).json()["items"]
    return sorted(j["id"] for j in items if j["owner"] == "alice")


def launched(e: InProcess, count: int) -> list[str]:
    return until(lambda: len(e.engine.launched) >= count and list(e.engine.launched), timeout=10)


def end(e: InProcess, attempt_id: str, exit_code: int = 0, metrics: dict | None = None) -> None:
    report(e.tc, e.engine, attempt_id, phase="running", pid=1, **({"metrics": metrics} if metrics else {}))
    reason = "Succeeded" if exit_code == 0 else f"Error(exit {exit_code})"
    report(e.tc, e.engine, attempt_id, phase="exited", pid=1,
           result={"exit_code": exit_code, "reason": reason, "outputs": []})


@pytest.mark.parametrize("change", CHANGES)
def test_a_running_sweep_starts_no_trial_for_an_owner_who_may_no_longer_submit(db_url, tmp_path, change):
    with vision(db_url, tmp_path / "home") as (e, alice):
        spec = {"name": "s", "job": {**JOB, "command": "train --x {{params.x}}"}, "metric": {"name": "acc"},
                "parameters": {"x": {"values": [1, 2, 3]}}, "method": "grid", "parallel": 1}
        r = e.tc.post("/api/v1/sweeps", json={"spec": spec}, headers=alice)
        assert r.status_code == 201, r.text
        [first] = launched(e, 1)
        take_rights(e, change)
        end(e, first, metrics={"offset": 0, "lines": ['{"step": 0, "ts": 1, "values": {"acc": 0.5}}']})
        # the old code went on with trial 1: a second job of alice's
        until(lambda: e.sdk.sweeps.get(r.json()["id"]).status.value != "running" or len(alices_jobs(e)) > 1)
        done = e.sdk.sweeps.get(r.json()["id"])
        assert done.status.value == "failed", done
        assert done.reason.startswith(f"trial 1 could not be submitted: {CHANGES[change]}"), done.reason
        assert [(t.number, t.state.value) for t in done.trials] == [(0, "complete")]
        assert len(alices_jobs(e)) == 1 and len(e.engine.launched) == 1


@pytest.mark.parametrize("change", CHANGES)
def test_a_pipeline_runs_next_step_fails_saying_its_owner_may_no_longer_submit(db_url, tmp_path, change):
    with vision(db_url, tmp_path / "home") as (e, alice):
        steps = {"a": {**JOB, "command": "prep"}, "b": {**JOB, "command": "train", "needs": ["a"]},
                 "c": {**JOB, "command": "eval", "needs": ["b"]}}
        r = e.tc.post("/api/v1/pipelines", json={"spec": {"name": "chain", "steps": steps}}, headers=alice)
        assert r.status_code == 201, r.text
        run_id = r.json()["id"]
        [first] = launched(e, 1)
        take_rights(e, change)
        end(e, first)
        until(lambda: e.sdk.pipelines.get(run_id).status.is_terminal() or len(alices_jobs(e)) > 1)
        run = e.sdk.pipelines.get(run_id)
        assert run.status.value == "failed", run
        b = run.step("b")
        assert b.state.value == "failed" and b.job_id is None, b
        assert b.reason.startswith(f"submit: {CHANGES[change]}"), b.reason
        assert run.step("c").state.value == "skipped"
        assert len(alices_jobs(e)) == 1 and len(e.engine.launched) == 1


@pytest.mark.parametrize("change", CHANGES)
def test_a_crashed_replica_is_not_replaced_for_an_owner_who_may_no_longer_submit(db_url, tmp_path, change):
    with vision(db_url, tmp_path / "home") as (e, alice):
        spec = {**JOB, "name": "web", "command": ["python", "app.py"], "service": {"replicas": 2}}
        r = e.tc.post("/api/v1/services", json={"spec": spec}, headers=alice)
        assert r.status_code in (200, 201), r.text
        crashed, other = launched(e, 2)
        take_rights(e, change)
        end(e, crashed, exit_code=1)
        # the old code started another replica once the first crash's backoff (1s) had passed
        why = f"no replica is started: {CHANGES[change]}"
        until(lambda: why in (e.sdk.services.get("web").reason or "") or len(alices_jobs(e)) > 2,
              show=lambda: e.sdk.services.get("web").reason)
        web = e.sdk.services.get("web")
        assert why in web.reason and "those running go on" in web.reason, web.reason
        assert len(alices_jobs(e)) == 2 and len(e.engine.launched) == 2
        # the replica still running is left be; the server's own service on that queue is not held back
        assert [x.job_id for x in web.replicas] == [other.rsplit("-", 1)[0]], web.replicas
        e.sdk.services.apply({**spec, "name": "own", "service": {"replicas": 1}})
        launched(e, 3)


def test_a_dask_cluster_adds_no_worker_for_an_owner_who_may_no_longer_submit(db_url, tmp_path):
    with vision(db_url, tmp_path / "home") as (e, alice):
        # a cluster of alice's whose scheduler was placed (the loop's own tick leaves one with no scheduler job be)
        spec = ClusterSpec.model_validate({"name": "etl", "queue": "vision-q", "workers": 2})
        cid = e.platform.dask.clusters.create(spec, owner="alice", team="vision")
        e.platform.dask.clusters.set(cid, address="tcp://127.0.0.1:1")
        loop, mem = e.platform.dask_loop, Memory()
        assert loop._resize(e.platform.dask.clusters.get(cid), mem, [], 1, None) is None
        [worker] = alices_jobs(e)
        take_rights(e, "disabled")
        row = e.platform.dask.clusters.get(cid)
        why = loop._resize(row, mem, [e.platform.jobs.get(worker)], 2, None)
        assert why is not None and why.startswith(CHANGES["disabled"]), why
        assert alices_jobs(e) == [worker] and e.platform.dask.clusters.get(cid)["worker_jobs"] == [worker]


@pytest.mark.parametrize("change", CHANGES)
def test_a_failed_job_is_not_retried_for_an_owner_who_may_no_longer_submit(db_url, tmp_path, change):
    with vision(db_url, tmp_path / "home") as (e, alice):
        spec = {**JOB, "name": "flaky", "command": "train", "retry": {"max": 3, "backoff": 0}}
        r = e.tc.post("/api/v1/jobs", json={"spec": spec}, headers=alice)
        assert r.status_code == 201, r.text
        [first] = launched(e, 1)
        take_rights(e, change)
        end(e, first, exit_code=1)
        # the old code launched attempt 2 at once (no backoff), as alice's Unix account where she has one
        until(lambda: e.sdk.get(r.json()["id"]).status.is_terminal() or len(e.engine.launched) > 1)
        job = e.sdk.get(r.json()["id"])
        assert job.status.value == "failed" and len(e.engine.launched) == 1, job
        assert CHANGES[change] in job.attempts[-1].message, job.attempts[-1]


def test_a_pipeline_runs_serve_step_applies_no_service_for_an_owner_who_may_no_longer_submit(db_url, tmp_path):
    from tests.integration.test_pipelines_api import finish

    with vision(db_url, tmp_path / "home") as (e, alice):
        steps = {"train": {**JOB, "command": "train {{outputs.model}}", "outputs": ["model"]},
                 "deploy": {"serve": {"model": "{{steps.train.outputs.model}}/m.pkl", "name": "web",
                                      "queue": "vision-q", "resources": {"cpu": 1}}}}
        r = e.tc.post("/api/v1/pipelines", json={"spec": {"name": "ship", "steps": steps}}, headers=alice)
        assert r.status_code == 201, r.text
        run_id = r.json()["id"]
        [first] = launched(e, 1)
        take_rights(e, "disabled")
        finish(e.tc, e.engine, first.rsplit("-", 1)[0], files={"model/m.pkl": b"not a model"})
        until(lambda: e.sdk.pipelines.get(run_id).status.is_terminal())
        deploy = e.sdk.pipelines.get(run_id).step("deploy")
        # the old code applied service web in alice's name (its replicas then refused, one by one)
        assert deploy.state.value == "failed" and CHANGES["disabled"] in deploy.reason, deploy
        assert e.sdk.services.list() == []
