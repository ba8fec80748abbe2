"""Deleting ended jobs in-process (fake engine), on SQLite and PostgreSQL: ``DELETE /api/v1/jobs/ID`` (what
``trainyard rm`` sends) takes every record and file of the job and leaves its hours in the usage report and
its counts in ``/metrics``;
what may not go is refused saying why; the ``jobs`` retention deletes what is old enough, and only that."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

from tests.integration.test_monitoring_api import scrape
from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.auth.permissions import Caller, Role
from trainyard.config import RetentionSettings
from trainyard.errors import Conflict, JobNotFound, SweepNotFound
from trainyard.spec.records import NodeInfo
from trainyard.store import tables as t
from trainyard.store import usage_tables as ut

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name=n, cpu=8, memory=16 * 2**30) for n in "ab"]
KEEP = 1000.0
BY_JOB = (t.Attempt, t.LogChunk, t.Metric, t.Artifact, t.ReplicaUsage, t.JobLabel)


@pytest.fixture
def env(db_url, tmp_path):
    with in_process(db_url, tmp_path / "home", NODES, retention=RetentionSettings(jobs=KEEP)) as e:
        yield e


def report(e, attempt_id: str, replica: int = 0, **body) -> None:
    r = e.tc.post(f"/internal/attempts/{attempt_id}/replicas/{replica}/report", json=body,
                  headers=e.engine.launcher_headers(attempt_id))
    assert r.status_code == 200, r.text


def ran(e, spec: dict, exit_code: int = 0) -> tuple[str, str]:
    """Submit ``spec``, have each replica log, report metrics and an output, and end; (job id, attempt id)."""
    job = e.sdk.submit(spec)
    attempt = until(lambda: (a := e.sdk.get(job.id).attempts) and a[-1].id)
    until(lambda: attempt in e.engine.launched)  # admitted first, then launched: its credential is made then
    for r in range(spec.get("replicas", 1)):
        report(e, attempt, r, phase="running", pid=1, log={"offset": 0, "data": "hi\n"},
               metrics={"offset": 0, "lines": ['{"step": 1, "ts": 1, "values": {"loss": 0.5, "system/cpu": 90}}']})
        report(e, attempt, r, phase="exited", pid=1, result={
            "exit_code": exit_code, "reason": "Succeeded" if exit_code == 0 else f"Error(exit {exit_code})",
            "outputs": [{"path": "model.pt", "size": 3, "digest": "sha256:" + "0" * 64}]})
    job.wait(timeout=10)
    return job.id, attempt


def rows(e, table, job_id: str) -> int:
    c = table.__table__.c
    with e.platform.store.read() as s:
        return s.connection().execute(select(func.count()).where(c.job_id == job_id)).scalar()


def counters(e) -> dict:
    return {k: v for k, v in scrape(e.tc).items() if k[0] in ("trainyard_attempts_ended_total",
                                                              "trainyard_admission_wait_time_seconds_count",
                                                              "trainyard_admission_wait_time_seconds_sum")}


def events(e, job_id: str) -> int:
    c = t.Event.__table__.c
    with e.platform.store.read() as s:
        return s.connection().execute(select(func.count()).where(c.kind == "job", c.object_id == job_id)).scalar()


def test_an_ended_job_goes_with_its_records_and_files_and_its_hours_stay_in_the_usage_report(env):
    e = env
    gone, attempt = ran(e, {"name": "gone", "command": "x", "replicas": 2, "distributed": "torch",
                            "placement": "spread", "labels": {"exp": "gone"}})
    kept, _ = ran(e, {"name": "kept", "command": "x"})
    files = e.platform.settings.home / "artifacts" / "jobs" / gone / "1" / "outputs"
    files.mkdir(parents=True)
    (files / "model.pt").write_bytes(b"abc")
    before = e.sdk.monitoring.usage(by="user", since="1d").rows
    counted = counters(e)
    assert counted[("trainyard_attempts_ended_total", (("queue", "default"), ("reason", "Succeeded")))] == 2
    assert all(rows(e, table, gone) for table in BY_JOB) and events(e, gone)
    e.sdk.get(gone)  # read once: an ended job is then answered from memory

    r = e.tc.delete(f"/api/v1/jobs/{gone}")
    assert r.status_code == 204, r.text
    # then nothing of it is left: its records, its folders on both nodes, its files in the artifact store
    assert e.tc.get(f"/api/v1/jobs/{gone}").status_code == 404
    assert not any(rows(e, table, gone) for table in BY_JOB) and not events(e, gone)
    assert {(i.node, i.kind, i.name) for i in e.engine.removed} == {
        ("a", "deleted", attempt), ("b", "deleted", attempt), ("a", "checkpoints", gone), ("b", "checkpoints", gone)}
    assert not (e.platform.settings.home / "artifacts" / "jobs" / gone).exists()
    listed = {j.id for j in e.sdk.jobs(limit=100).items}
    assert gone not in listed and kept in listed
    # and the usage report counts its hours as before, from the archive
    after = e.sdk.monitoring.usage(by="user", since="1d").rows
    assert [(r.key, r.attempts) for r in after] == [(r.key, r.attempts) for r in before]
    assert [r.cpu_hours for r in after] == pytest.approx([r.cpu_hours for r in before])
    assert rows(e, ut.UsageArchive, gone) == 1
    assert counters(e) == counted  # /metrics' counters never go down: Prometheus would read a reset
    assert [a.action for a in e.platform.store.audit(limit=1)] == ["job.delete"]
    # a second delete finds nothing; the other job is untouched
    assert e.tc.delete(f"/api/v1/jobs/{gone}").status_code == 404
    assert rows(e, t.LogChunk, kept) and e.sdk.get(kept).status.value == "succeeded"


def test_what_may_not_be_deleted_is_refused_saying_why_and_loses_nothing(env):
    e = env
    running = e.sdk.submit({"name": "running", "command": "x"})
    until(lambda: e.sdk.get(running.id).attempts)
    done, _ = ran(e, {"name": "done", "command": "x"})
    waiter = e.sdk.submit({"name": "waiter", "command": "x", "after": [f"{running.id}:ended", done]})
    for job_id, why in [(running.id, "it is starting: cancel it first"),
                        (done, f"job {waiter.id} waits for it (after): cancel that one first")]:
        r = e.tc.delete(f"/api/v1/jobs/{job_id}")
        assert r.status_code == 409 and why in r.json()["message"], r.text
        assert e.sdk.get(job_id).id == job_id and rows(e, t.Attempt, job_id) == 1
    with pytest.raises(Conflict, match="waits for it"):
        e.sdk.delete(done)
    with pytest.raises(Conflict, match="it is starting"):
        running.delete()  # the SDK's job handle
    # another team's job is as if it were not there
    with pytest.raises(JobNotFound):
        e.platform.jobs.delete(done, Caller(user="eve", teams={"elsewhere": Role.MAINTAINER}))
    with pytest.raises(JobNotFound):
        e.sdk.delete("j-nothere00")


def test_a_job_whose_outputs_a_live_service_serves_stays_until_the_service_is_deleted(env):
    from trainyard.spec.service import ServiceSpec

    e = env
    served, _ = ran(e, {"name": "trained", "command": "x"})
    e.platform.serving.apply(ServiceSpec.model_validate(
        {"name": "web", "command": ["serve", "--model", "{{inputs.model}}"], "service": {"replicas": 1},
         "inputs": {"model": f"job://{served}/model.pt"}}))
    # the service holds the input as the artifact-store URL it was resolved to, not as job://
    assert "job://" not in str(e.platform.serving.get("web").spec.inputs)
    r = e.tc.delete(f"/api/v1/jobs/{served}")
    assert r.status_code == 409 and "service web" in r.json()["message"], r.text
    assert "serves its outputs" in r.json()["message"]
    assert e.sdk.get(served).id == served
    e.platform.serving.delete("web")
    until(lambda: e.tc.delete(f"/api/v1/jobs/{served}").status_code == 204)


def test_an_ended_dask_cluster_whose_jobs_were_deleted_still_shows(env):
    from trainyard.spec.cluster import ClusterSpec
    from trainyard.store.clusters import ClusterStore

    e = env
    scheduler, _ = ran(e, {"name": "dask-scheduler", "command": "x"})
    worker, _ = ran(e, {"name": "dask-worker", "command": "x"})
    clusters = ClusterStore(e.platform.store)
    cid = clusters.create(ClusterSpec(name="etl", workers=1))
    with e.platform.store.write() as s:  # as the cluster loop leaves an ended cluster: its jobs named
        s.execute(t.DaskCluster.__table__.update().where(t.DaskCluster.__table__.c.id == cid).values(
            status="stopped", scheduler_job=scheduler, worker_jobs=[worker], ended_at=time.time()))
    for job_id in (scheduler, worker):
        assert e.tc.delete(f"/api/v1/jobs/{job_id}").status_code == 204
    r = e.tc.get(f"/api/v1/clusters/{cid}")
    assert r.status_code == 200, r.text  # not "no such job"
    assert [(w["job_id"], w["status"]) for w in r.json()["worker_jobs"]] == [(worker, "deleted")]
    assert r.json()["scheduler_node"] is None and r.json()["scheduler_job"] == scheduler


def test_the_jobs_retention_deletes_ended_jobs_old_enough_and_keeps_the_rest(env):
    e = env
    old, _ = ran(e, {"name": "old", "command": "x"})
    failed, _ = ran(e, {"name": "failed", "command": "x", "retry": {"max": 0}}, exit_code=3)
    young, _ = ran(e, {"name": "young", "command": "x"})
    waited, _ = ran(e, {"name": "waited", "command": "x"})
    blocker = e.sdk.submit({"name": "blocker", "command": "x"})
    until(lambda: e.sdk.get(blocker.id).attempts)
    waiter = e.sdk.submit({"name": "waiter", "command": "x", "after": [blocker.id, waited]})
    with e.platform.store.write() as s:  # ended long ago but "young"
        jobs = t.Job.__table__
        s.execute(jobs.update().where(jobs.c.id != young).values(updated_at=time.time() - 2 * KEEP))
    sweep = e.platform.retention
    sweep.cycle()
    ids = {j.id for j in e.sdk.jobs(limit=100).items}
    assert old not in ids and failed not in ids and sweep.jobs_deleted == 2
    # what has not ended, ended lately, or is waited for stays
    assert {young, waited, blocker.id, waiter.id} <= ids
    assert rows(e, ut.UsageArchive, old) == 1


SWEEP = {"name": "s", "job": {"command": "train --x {{params.x}}", "resources": {"cpu": 1}},
         "parameters": {"x": {"values": [1, 2]}}, "metric": {"name": "acc"}, "method": "grid", "parallel": 1}


def end_trial(e, seen: set, acc: float) -> str:
    attempt = until(lambda: next((a for a in e.engine.launched if a not in seen), None))
    seen.add(attempt)
    report(e, attempt, phase="running", pid=1,
           metrics={"offset": 0, "lines": ['{"step": 0, "ts": 1, "values": {"acc": %s}}' % acc]})
    report(e, attempt, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    return attempt


def ended_sweep(e):
    """A sweep whose two trials ended, as its loop ended it."""
    s, seen = e.sdk.sweep(SWEEP), set()
    end_trial(e, seen, 0.5)
    end_trial(e, seen, 0.9)
    return e.sdk.sweeps.wait(s.id, timeout=30, every=0.1)


def test_a_sweep_goes_whole_once_ended_and_its_trials_never_alone(env):
    e, seen = env, set()
    s = e.sdk.sweep(SWEEP)
    end_trial(e, seen, 0.5)
    trial_job = until(lambda: (t := e.sdk.sweeps.get(s.id).trials) and t[0].job_id)
    until(lambda: e.sdk.get(trial_job).status.value == "succeeded")
    # running: refused, and a trial's job alone is refused naming its sweep, even once it has ended
    r = e.tc.delete(f"/api/v1/sweeps/{s.id}")
    assert r.status_code == 409 and "it is running: cancel it first" in r.json()["message"], r.text
    r = e.tc.delete(f"/api/v1/jobs/{trial_job}")
    assert r.status_code == 409 and f"it is trial 0 of sweep {s.id}" in r.json()["message"], r.text
    end_trial(e, seen, 0.9)
    done = e.sdk.sweeps.wait(s.id, timeout=30, every=0.1)
    assert done.status.value == "succeeded"
    # ended: it goes with both trials' jobs, whose hours stay counted
    e.sdk.sweeps.delete(s.id)
    with pytest.raises(SweepNotFound):
        e.sdk.sweeps.get(s.id)
    for t in done.trials:
        assert e.tc.get(f"/api/v1/jobs/{t.job_id}").status_code == 404 and rows(e, ut.UsageArchive, t.job_id) == 1
    assert [a.action for a in e.platform.store.audit(limit=1)] == ["sweep.delete"]


def test_the_jobs_retention_deletes_an_ended_sweep_with_its_trials(env):
    e = env
    done = ended_sweep(e)
    sweep = e.platform.retention
    sweep.cycle()  # ended just now: kept
    assert e.sdk.sweeps.get(done.id).id == done.id and sweep.sweeps_deleted == 0
    with e.platform.store.write() as w:
        w.execute(t.Sweep.__table__.update().values(ended_at=time.time() - 2 * KEEP))
        w.execute(t.Job.__table__.update().values(updated_at=time.time() - 2 * KEEP))
    sweep.cycle()
    assert sweep.sweeps_deleted == 1 and sweep.jobs_deleted == 2
    assert not {j.id for j in e.sdk.jobs(limit=100).items} & {tr.job_id for tr in done.trials}


def test_the_jobs_retention_deletes_an_ended_dask_clusters_record_once_its_jobs_are_gone(env):
    from trainyard.errors import ClusterNotFound
    from trainyard.spec.cluster import ClusterSpec
    from trainyard.store.clusters import ClusterStore

    e = env
    clusters = ClusterStore(e.platform.store)
    c = t.DaskCluster.__table__.c
    old = time.time() - 2 * KEEP
    scheduler, _ = ran(e, {"name": "dask-scheduler", "command": "x"})
    kept_job, _ = ran(e, {"name": "dask-worker", "command": "x"})
    ended, holding, live = (clusters.create(ClusterSpec(name=n, workers=1)) for n in ("etl", "held", "live"))
    with e.platform.store.write() as s:  # ended long ago, as the cluster loop leaves them; one still running
        s.execute(t.DaskCluster.__table__.update().where(c.id == ended).values(
            status="stopped", scheduler_job=scheduler, worker_jobs=[], ended_at=old))
        s.execute(t.DaskCluster.__table__.update().where(c.id == holding).values(
            status="failed", scheduler_job=None, worker_jobs=[kept_job], ended_at=old))
        s.execute(t.DaskCluster.__table__.update().where(c.id == live).values(status="running"))
        s.execute(t.Job.__table__.update().where(t.Job.__table__.c.id == scheduler).values(updated_at=old))
    sweep = e.platform.retention
    sweep.cycle()
    # its old job went first, then its record; a cluster whose job is kept (ended lately) stays, as does a live one
    with pytest.raises(ClusterNotFound):
        clusters.get(ended)
    assert clusters.get(holding)["worker_jobs"] == [kept_job] and clusters.get(live)["status"].value == "running"
    assert sweep.clusters_deleted == 1 and sweep.jobs_deleted == 1
    assert scrape(e.tc)[("trainyard_retention_dask_clusters_deleted_total", ())] == 1
    assert e.tc.get(f"/api/v1/clusters/{ended}").status_code == 404


def test_the_jobs_retention_leaves_a_job_labelled_to_be_kept_until_the_label_goes(env):
    e = env
    pinned, _ = ran(e, {"name": "pinned", "command": "x"})
    plain, _ = ran(e, {"name": "plain", "command": "x", "labels": {"keep": "false"}})  # not the selector's value
    e.sdk.label(pinned, {"keep": "true"})  # after it ended: the retention's default selector, keep=true
    with e.platform.store.write() as s:  # both ended long ago
        s.execute(t.Job.__table__.update().values(updated_at=time.time() - 2 * KEEP))
    sweep = e.platform.retention
    sweep.cycle()
    ids = {j.id for j in e.sdk.jobs(limit=100).items}
    assert pinned in ids and plain not in ids and sweep.jobs_deleted == 1
    e.sdk.label(pinned, {"keep": None})  # unpinned: gone with the next sweep (a label is not a status change)
    sweep.cycle()
    assert pinned not in {j.id for j in e.sdk.jobs(limit=100).items} and sweep.jobs_deleted == 2


def test_a_sweep_one_of_whose_trials_is_labelled_to_be_kept_stays_whole(env):
    e = env
    done = ended_sweep(e)
    best = max(done.trials, key=lambda tr: tr.value or 0).job_id
    e.sdk.label(best, {"keep": "true"})
    with e.platform.store.write() as w:
        w.execute(t.Sweep.__table__.update().values(ended_at=time.time() - 2 * KEEP))
        w.execute(t.Job.__table__.update().values(updated_at=time.time() - 2 * KEEP))
    sweep = e.platform.retention
    sweep.cycle()
    assert e.sdk.sweeps.get(done.id).id == done.id and sweep.sweeps_deleted == 0 and sweep.jobs_deleted == 0
    assert {tr.job_id for tr in done.trials} <= {j.id for j in e.sdk.jobs(limit=100).items}


def test_a_job_pinned_after_the_sweep_picked_it_is_still_kept_and_rm_is_not_held_by_it(env):
    e = env
    job, _ = ran(e, {"name": "late-pin", "command": "x"})
    remover, keep = e.platform.retention.remover, e.platform.retention.keep
    e.sdk.label(job, {"keep": "true"})  # between the sweep's query and its delete
    assert remover.remove([job], keep) == [] and e.sdk.get(job).id == job
    assert [d.job_id for d in remover.remove([job])] == [job]  # `trainyard rm` deletes a pinned job
