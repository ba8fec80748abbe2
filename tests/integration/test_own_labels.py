"""trainyard's own labels (``trainyard.io/…``) name the sweep, pipeline run or service a job belongs to: a user's
own job, sweep, service, schedule or pipeline step may not claim one (422 naming the field, nothing stored), and
a re-run of a trial is a job of the user's, with the trial's own labels left behind."""

import pytest

from tests.integration.test_api import env, report  # noqa: F401  (the fixture)
from tests.support.waiting import until

pytestmark = pytest.mark.postgres

CLAIM = {"exp": "a", "trainyard.io/sweep": "s-0123456789"}


def errors(r):
    assert r.status_code == 422, r.text
    return r.json()["details"]["errors"]


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_job_claiming_trainyards_own_label_is_refused_naming_it_and_nothing_is_stored(env, dry_run):  # noqa: F811
    tc, sdk, engine, _ = env
    r = tc.post("/api/v1/jobs", params={"dry_run": dry_run}, json={"spec": {"command": "x", "labels": CLAIM}})
    [e] = errors(r)
    assert e["field"] == "labels" and e["message"].startswith("trainyard.io/sweep: labels under trainyard.io/ are "
                                                              "trainyard's own"), e
    text = "name: t\ncommand: x\nlabels:\n  exp: a\n  trainyard.io/service: web\n"
    r = tc.post("/api/v1/jobs", content=text, headers={"Content-Type": "application/yaml"})
    [e] = errors(r)
    assert (e["field"], e["line"]) == ("labels", 3) and "trainyard.io/service" in e["message"], e
    assert sdk.jobs().items == [] and engine.launched == {}
    # trainyard.io without the slash is a user's prefix like any other
    assert sdk.submit({"command": "x", "labels": {"trainyard.iox/a": "b"}}).info.spec.labels == {"trainyard.iox/a": "b"}


def test_templates_and_pipeline_steps_claiming_one_are_refused_naming_the_field(env):  # noqa: F811
    tc, sdk, engine, _ = env
    sweep = {"name": "s", "job": {"command": "train {{params.x}}", "labels": CLAIM},
             "parameters": {"x": {"values": [1]}}, "metric": {"name": "acc"}}
    [e] = errors(tc.post("/api/v1/sweeps", json={"spec": sweep}))
    assert e["field"] == "job" and e["message"].startswith("trainyard.io/sweep: labels under trainyard.io/"), e
    service = {"name": "web", "command": "app", "labels": {"trainyard.io/service-version": "9"}}
    [e] = errors(tc.post("/api/v1/services", json={"spec": service}))
    assert e["field"] == "labels" and e["message"].startswith("trainyard.io/service-version: labels under"), e
    r = tc.post("/api/v1/pipelines", json={"spec": {"steps": {"a": {"command": "x", "labels": CLAIM}}}})
    assert any(e["field"] == "steps.a.labels" and "trainyard.io/sweep" in e["message"] for e in errors(r))
    assert sdk.jobs().items == [] and sdk.sweeps.list() == [] and sdk.services.list() == [] and not engine.launched


def test_a_trial_run_again_is_the_users_job_without_the_sweeps_labels(env):  # noqa: F811
    tc, sdk, engine, _ = env
    s = sdk.sweep({"name": "s", "job": {"command": "train {{params.x}}", "labels": {"exp": "a"}},
                   "parameters": {"x": {"values": [1]}}, "metric": {"name": "acc"}, "method": "grid"})
    attempt = until(lambda: next(iter(engine.launched), None))
    report(tc, engine, attempt, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})
    trial = sdk.sweeps.wait(s.id, timeout=30, every=0.1).trials[0].job_id
    assert sdk.get(trial).spec.labels == {"exp": "a", "trainyard.io/sweep": s.id, "trainyard.io/trial": "0"}

    again = sdk.rerun(trial)

    assert again.info.spec.labels == {"exp": "a"} and again.id != trial
    assert [j.id for j in sdk.jobs(labels={"trainyard.io/sweep": s.id}).items] == [trial]
