"""The sweep loop in-process, with the fake engine (trials' ends and metrics reported as launchers would), on SQLite
and PostgreSQL: a trial that can no longer be submitted fails the sweep with the reason instead of retrying it
every tick, and a grid sweep's trials are jobs with its params and it ends with the best."""

import pytest

from tests.integration.test_api import env, report  # noqa: F401  (the fixture)
from tests.support.waiting import until
from trainyard.spec.submitted import STORED
from trainyard.spec.sweep import SweepSpec, SweepStatus

pytestmark = pytest.mark.postgres

SPEC = {"name": "s", "job": {"command": "train --x {{params.x}}", "resources": {"cpu": 1}},
        "parameters": {"x": {"values": [1, 2, 3]}}, "metric": {"name": "acc"}, "method": "grid", "parallel": 1}


def _end_trial(tc, engine, attempt_id: str, acc: float) -> None:
    line = '{"step": 0, "ts": 1, "values": {"acc": %s}}' % acc
    report(tc, engine, attempt_id, phase="running", pid=1, metrics={"offset": 0, "lines": [line]})
    report(tc, engine, attempt_id, phase="exited", pid=1, result={"exit_code": 0, "reason": "Succeeded", "outputs": []})


def test_a_trial_that_can_no_longer_be_submitted_fails_the_sweep_saying_why(env):  # noqa: F811
    tc, sdk, engine, platform = env
    s = sdk.sweep(SPEC)
    first = until(lambda: next(iter(engine.launched), None))
    engine._nodes = []  # the cluster lost its only node: trial 1 fits nowhere now
    _end_trial(tc, engine, first, 0.5)
    done = sdk.sweeps.wait(s.id, timeout=30, every=0.1)
    assert done.status.value == "failed"
    assert done.reason.startswith("trial 1 could not be submitted: ") and "no nodes" in done.reason, done.reason
    assert [(t.number, t.state.value, t.value) for t in done.trials] == [(0, "complete", 0.5)]


def test_a_grid_sweep_ends_with_its_best_trial_and_every_trial_as_a_job_with_its_params(env):  # noqa: F811
    tc, sdk, engine, platform = env
    s, seen = sdk.sweep(SPEC), set()
    for acc in (0.5, 0.9, 0.7):
        attempt = until(lambda: next((a for a in engine.launched if a not in seen), None))
        seen.add(attempt)
        _end_trial(tc, engine, attempt, acc)
    done = sdk.sweeps.wait(s.id, timeout=30, every=0.1)
    assert done.status.value == "succeeded" and done.best.number == 1 and done.best.value == 0.9
    assert [sdk.get(t.job_id).spec.argv()[-1] for t in done.trials] == [f"train --x {x}" for x in (1, 2, 3)]


@pytest.mark.parametrize("x", [{"min": 0.0, "max": 1e300, "step": 1e-300}, {"min": -1e308, "max": 1e308}])
def test_a_stored_sweep_optuna_cannot_sample_fails_saying_why_instead_of_jamming_the_loop(env, x):  # noqa: F811
    tc, sdk, engine, platform = env
    # given a sweep stored before its range was checked at submit (the API refuses this spec now)
    spec = SweepSpec.model_validate({**SPEC, "method": "random", "parameters": {"x": x}}, context=STORED)
    assert tc.post("/api/v1/sweeps", json={"spec": spec.model_dump(mode="json")}).status_code == 422
    sid = platform.sweeps.sweeps.create(spec, None, owner=None, team=None)
    platform.sweeps.wake()
    done = sdk.sweeps.wait(sid, timeout=30, every=0.1)
    assert done.status.value == "failed" and done.trials == [] and not engine.launched
    assert done.reason.startswith("trial 0 could not be sampled from the parameters: "), done.reason
    # and the loop goes on with the sweeps it can run
    assert sdk.sweep(SPEC).id and until(lambda: next(iter(engine.launched), None))


def test_a_trial_job_whose_stop_a_crash_lost_is_stopped_by_the_loop(env):  # noqa: F811
    tc, sdk, engine, platform = env
    s = sdk.sweep(SPEC)
    until(lambda: next(iter(engine.launched), None))
    [trial] = sdk.sweeps.get(s.id).trials
    # as a crash right after the cancel's transaction leaves it: the sweep and its trial ended, the job not stopped
    ended = platform.sweeps.sweeps.end(s.id, SweepStatus.CANCELLED, "cancelled", "the sweep was cancelled")
    assert ended == [trial.job_id] and sdk.sweeps.get(s.id).trials[0].state.value == "cancelled"
    platform.sweeps.wake()
    until(lambda: sdk.get(trial.job_id).status.value in ("cancelling", "cancelled"), timeout=30)
