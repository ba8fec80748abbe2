"""Deleting ended pipeline runs in-process (fake engine), on SQLite and PostgreSQL: ``DELETE
/api/v1/pipelines/ID`` (what ``trainyard pipeline rm`` sends) takes the run with its steps, its artifacts'
records and its steps' jobs with their files; a run whose outputs another run's cached step reuses stays
until that run goes; the ``jobs`` retention deletes old ended runs the same way."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

from tests.integration.test_monitoring_api import scrape
from tests.integration.test_pipelines_api import PIPELINE, finish, play, step_job
from tests.support.waiting import until
from trainyard.auth.permissions import Caller, Role
from trainyard.config import RetentionSettings, ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.errors import Conflict, PipelineRunNotFound
from trainyard.services.platform import Platform
from trainyard.spec.records import NodeInfo
from trainyard.store import tables as t
from trainyard.store import usage_tables as ut

pytestmark = pytest.mark.postgres

KEEP = 1000.0


@pytest.fixture
def env(db_url, tmp_path):
    from fastapi.testclient import TestClient

    from trainyard.api.app import create_app
    from trainyard.sdk.client import Client

    engine = FakeEngine([NodeInfo(name="a", cpu=8, memory=16 * 2**30)])
    settings = ServerSettings(home=tmp_path / "home", db=db_url, retention=RetentionSettings(jobs=KEEP))
    platform = Platform(settings, engine=engine)
    with TestClient(create_app(platform, "http://testserver")) as tc:
        yield tc, Client("http://testserver", transport=tc._transport), engine, platform


def count(platform, table, **where) -> int:
    c = table.__table__.c
    with platform.store.read() as s:
        return s.connection().execute(select(func.count()).select_from(table.__table__).where(
            *[c[k] == v for k, v in where.items()])).scalar()


def succeeded(tc, sdk, engine):  # noqa: ANN001, ANN201
    run = sdk.pipelines.run(PIPELINE)
    play(tc, engine, run)
    finish(tc, engine, step_job(run, "merge"), {"model": b"avg"})
    assert run.wait(timeout=10).status.value == "succeeded"
    return run


def test_a_run_goes_whole_once_ended_and_no_other_run_reuses_its_outputs(env):
    tc, sdk, engine, platform = env
    first = succeeded(tc, sdk, engine)
    jobs = [s.job_id for s in first.info.steps]
    second = sdk.pipelines.run(PIPELINE).wait(timeout=10)  # every step cached from the first
    assert {s.status for s in second.steps} == {"cached"}
    third = sdk.pipelines.run(PIPELINE, {"epochs": 5})  # split cached from the first; train runs
    until(lambda: third.step("train-0").job_id)
    home = platform.settings.home / "artifacts" / "jobs"
    assert all((home / j).exists() for j in jobs)
    art = first.info.step("merge").artifacts["model"]

    # refused, saying why, and nothing lost: a running run; a run whose outputs others reuse; a step's job alone
    r = tc.delete(f"/api/v1/pipelines/{third.id}")
    assert r.status_code == 409 and "it is running: cancel it first" in r.json()["message"], r.text
    r = tc.delete(f"/api/v1/pipelines/{first.id}")
    assert r.status_code == 409, r.text
    reusers = ", ".join(sorted([second.id, third.id]))
    assert f"pipeline runs {reusers} reuse its outputs (cached steps): delete those runs first" in r.json()["message"]
    r = tc.delete(f"/api/v1/jobs/{jobs[0]}")
    assert r.status_code == 409 and f"it is step split of pipeline run {first.id}" in r.json()["message"]
    assert sdk.pipelines.artifact(art).job_id == jobs[-1] and sdk.get(jobs[0]).id == jobs[0]
    with pytest.raises(PipelineRunNotFound):  # another team's run is as if it were not there
        platform.pipelines.delete(second.id, Caller(user="eve", teams={"elsewhere": Role.MAINTAINER}))

    # the run that only reused goes alone: the first run's jobs and files stay
    sdk.pipelines.delete(second.id)
    with pytest.raises(PipelineRunNotFound):
        sdk.pipelines.get(second.id)
    assert count(platform, t.PipelineStep, run_id=second.id) == 0 and sdk.get(jobs[0]).id == jobs[0]
    with pytest.raises(Conflict, match=f"pipeline run {third.id} reuses its outputs \\(a cached step\\)"):
        first.delete()  # the third run's split still reuses the first's
    sdk.pipelines.cancel(third.id)
    until(lambda: sdk.pipelines.get(third.id).status.value == "cancelled")
    sdk.pipelines.delete(third.id)

    # then the first goes with every step's job, its artifacts' records and files; the jobs' hours stay counted
    sdk.pipelines.delete(first.id)
    assert tc.get(f"/api/v1/pipelines/{first.id}").status_code == 404
    for table in (t.PipelineStep, t.PipelineArtifact):
        assert count(platform, table, run_id=first.id) == 0
    assert count(platform, t.Event, kind="pipeline_run", object_id=first.id) == 0
    for j in jobs:
        assert tc.get(f"/api/v1/jobs/{j}").status_code == 404 and count(platform, ut.UsageArchive, job_id=j) == 1
        assert not (home / j).exists()
    assert tc.get(f"/api/v1/artifacts/{art}").status_code == 404
    assert [a.action for a in platform.store.audit(limit=1)] == ["pipeline.delete"]
    assert tc.delete(f"/api/v1/pipelines/{first.id}").status_code == 404
    # a new run finds no cache to reuse: its steps run again
    again = sdk.pipelines.run(PIPELINE)
    assert step_job(again, "split") not in jobs


def test_the_jobs_retention_deletes_old_ended_runs_the_newest_reuser_first(env):
    tc, sdk, engine, platform = env
    first = succeeded(tc, sdk, engine)
    second = sdk.pipelines.run(PIPELINE).wait(timeout=10)
    sweep = platform.retention
    sweep.cycle()  # ended just now: kept
    assert sweep.runs_deleted == 0 and sdk.pipelines.get(first.id).id == first.id
    with platform.store.write() as w:
        runs = t.PipelineRun.__table__
        w.execute(runs.update().where(runs.c.id == first.id).values(ended_at=time.time() - 3 * KEEP))
        w.execute(runs.update().where(runs.c.id == second.id).values(ended_at=time.time() - 2 * KEEP))
    # the first is reused by the second, which goes in this sweep; the first at the next
    sweep.cycle()
    assert sweep.runs_deleted == 1 and sdk.pipelines.get(first.id).id == first.id
    with pytest.raises(PipelineRunNotFound):
        sdk.pipelines.get(second.id)
    sweep.cycle()
    assert sweep.runs_deleted == 2 and sweep.jobs_deleted == len(first.info.steps)
    assert scrape(tc)[("trainyard_retention_pipeline_runs_deleted_total", ())] == 2
    with pytest.raises(PipelineRunNotFound):
        sdk.pipelines.get(first.id)


def test_the_jobs_retention_leaves_a_run_one_of_whose_steps_is_labelled_to_be_kept(env):
    tc, sdk, engine, platform = env
    run = succeeded(tc, sdk, engine)
    merge = step_job(run, "merge")
    sdk.label(merge, {"keep": "true"})  # the averaged model's job: the run stays whole with it
    with platform.store.write() as w:
        runs = t.PipelineRun.__table__
        w.execute(runs.update().where(runs.c.id == run.id).values(ended_at=time.time() - 2 * KEEP))
    sweep = platform.retention
    sweep.cycle()
    assert sweep.runs_deleted == 0 and sdk.pipelines.get(run.id).id == run.id
    sdk.label(merge, {"keep": None})
    sweep.cycle()
    assert sweep.runs_deleted == 1
    with pytest.raises(PipelineRunNotFound):
        sdk.pipelines.get(run.id)
