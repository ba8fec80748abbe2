"""Sweeps on a real server: trials are real jobs with the sampled params, their metric goes to Optuna step by step,
a weak trial is stopped early, the best is named; bad specs are refused naming the field; a cancel stops the
running trials; a server restarted mid-sweep goes on from what its database holds."""

from __future__ import annotations

import json
import sys

import httpx
import pytest

from tests.conftest import host_server

pytestmark = pytest.mark.slow

# score = -(x - 0.3)² × (step + 1) + 1: the nearer x is to 0.3, the better, at every step
TRIAL = ("import time, trainyard\nx = float('{{params.x}}')\n"
         "for step in range({{params.steps}}):\n"
         "    trainyard.log_metrics(step=step, score=1 - (x - 0.3) ** 2 * (step + 1))\n"
         "    time.sleep({{params.pause}})\n"
         "open(trainyard.output_dir() / 'x.txt', 'w').write('{{params.x}}')\n")  # its "model"


def score(x: float, step: int) -> float:
    return 1 - (x - 0.3) ** 2 * (step + 1)


def sweep_spec(xs: list[float], **more: object) -> dict:
    return {"name": "quad", "job": {"command": [sys.executable, "-c", TRIAL], "resources": {"cpu": 0.5}},
            "parameters": {"x": {"values": xs}, "steps": 8, "pause": 0.4},
            "metric": {"name": "score", "goal": "maximize"}, "method": "grid", **more}


def test_a_sweep_runs_its_trials_as_jobs_stops_a_weak_one_early_and_names_the_best(server):
    c = server.client()
    # one at a time, in grid order: trial 2 (x = 0.9) is worse at every step than both before it
    spec = sweep_spec([0.3, 0.2, 0.9, 0.35], parallel=1,
                      early_stopping={"type": "median", "warmup_steps": 2, "min_trials": 2})
    info = c.sweeps.wait(c.sweep(spec).id, timeout=180)
    assert info.status.value == "succeeded", info.reason
    trials = {t.number: t for t in info.trials}
    assert [trials[n].params["x"] for n in range(4)] == [0.3, 0.2, 0.9, 0.35]
    assert [trials[n].state.value for n in range(4)] == ["complete", "complete", "pruned", "complete"]
    for n in (0, 1, 3):  # a trial's value is the last score its job logged
        assert trials[n].value == pytest.approx(score(trials[n].params["x"], 7)) and trials[n].step == 7
    assert info.best.number == 0 and info.best.value == pytest.approx(1.0)
    pruned = c.get(trials[2].job_id)
    assert pruned.status.value == "cancelled" and 2 <= trials[2].step < 7, (pruned.status, trials[2])
    # the job says why it was cancelled, as its trial does, and that no user asked it
    assert pruned.reason == f"{trials[2].reason} (sweep {info.id})", pruned.reason
    assert [(e.new_status, e.actor) for e in c.monitoring.events(pruned.id)][-1] == ("cancelled", "system")
    # each trial is an ordinary job of the sweep's owner, with its params (the constants too)
    job = c.get(trials[3].job_id)
    assert job.spec.name == "quad-3" and job.spec.params == {"x": 0.35, "steps": 8, "pause": 0.4}
    assert [p.value for p in c.metrics(trials[3].job_id)][-1] == pytest.approx(trials[3].value)


def test_a_random_sweep_keeps_to_its_trials_and_its_parallel_and_its_cli_shows_the_best(server, tmp_path):
    spec = sweep_spec([0.0], parallel=2, trials=4)
    spec.update(method="random", seed=7, parameters={"x": {"min": 0.0, "max": 1.0}, "steps": 2, "pause": 0.3})
    (tmp_path / "sweep.yaml").write_text(json.dumps(spec))  # JSON is YAML
    out = server.cli("sweep", "run", "sweep.yaml", "--wait", "-o", "json", cwd=tmp_path, timeout=180)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["status"] == "succeeded" and len(info["trials"]) == 4 and info["counts"] == {"complete": 4}
    xs = [t["params"]["x"] for t in info["trials"]]
    assert len(set(xs)) == 4 and all(0.0 <= x <= 1.0 for x in xs)
    assert info["best"]["value"] == pytest.approx(max(score(x, 1) for x in xs))
    # never more than two trials at once: each trial's job started after an earlier one's ended, but the first two
    jobs = [server.client().get(t["job_id"]) for t in info["trials"]]
    # each trial is labelled with its sweep and number: the sweep's jobs are one label filter away
    assert [j.spec.labels for j in jobs] == [{"trainyard.io/sweep": info["id"], "trainyard.io/trial": str(t["number"])}
                                             for t in info["trials"]]
    labelled = server.cli("ls", "-l", f"trainyard.io/sweep={info['id']}", "--ids", "--all").stdout.split()
    assert sorted(labelled) == sorted(t["job_id"] for t in info["trials"])
    starts = sorted(j.attempts[0].started_at for j in jobs)
    ends = sorted(j.attempts[0].ended_at for j in jobs)
    assert all(starts[i] >= ends[i - 2] for i in range(2, 4))
    shown = server.cli("sweep", "show", info["id"])
    assert shown.returncode == 0 and f"best: trial {info['best']['number']}" in shown.stdout, shown.stdout
    waited = server.cli("sweep", "wait", info["id"], "-o", "json")  # ended already: at once, as run --wait said
    assert waited.returncode == 0 and json.loads(waited.stdout)["best"] == info["best"], waited.stderr
    # `trainyard serve SWEEP` serves its best trial's outputs (at min 0 no replica starts)
    served = server.cli("serve", info["id"], "--name", "best-x", "--min", "0")
    assert served.returncode == 0 and f"best trial {info['best']['number']} (job " in served.stderr, served.stderr
    model = server.client().services.get("best-x").spec.inputs["model"]
    assert f"/jobs/{info['best']['job_id']}/" in model, model
    server.client().services.delete("best-x")
    got = server.cli("download", info["id"], "--to", str(tmp_path / "best"))  # and `download SWEEP` fetches them
    assert got.returncode == 0, got.stderr
    assert float((tmp_path / "best" / "x.txt").read_text()) == info["best"]["params"]["x"]
    # an ended sweep goes with its trials' jobs and their folders
    folders = [server.home / "attempts" / j.attempts[0].id for j in jobs]
    assert all(f.is_dir() for f in folders)
    gone = server.cli("sweep", "rm", info["id"])
    assert gone.returncode == 0 and gone.stdout.strip() == f"deleted sweep {info['id']}", gone.stderr
    assert server.cli("sweep", "show", info["id"]).returncode == 1 and not any(f.exists() for f in folders)
    assert not {j.id for j in server.client().jobs(limit=100).items} & {j.id for j in jobs}


@pytest.mark.parametrize("change, field", [
    ({"parameters": {"x": {"min": 1, "max": 0}, "steps": 1, "pause": 0}}, "parameters.x"),
    ({"parameters": {"x": {"min": 0, "max": 1}, "steps": 1, "pause": 0}, "method": "grid"}, ""),
    ({"metric": {"name": "score", "goal": "up"}}, "metric.goal"),
    ({"trials": 0}, "trials"),
    ({"parameters": {"x": {"values": [0.1]}, "pause": 0}}, "job"),  # the command names params.steps
    ({"early_stopping": {"type": "hyperband", "min_steps": 50, "max_steps": 20}}, "early_stopping.max_steps"),
    ({"early_stopping": {"type": "median", "min_trials": 1}}, "early_stopping"),  # one trial: never stopped
    ({"early_stopping": {"type": "hyperband", "warmup_steps": 2}}, "early_stopping.warmup_steps"),
], ids=["an empty range", "a grid over a range", "an unknown goal", "no trials", "a param the command lacks",
        "hyperband max under min", "median waits for every trial", "a median setting on hyperband"])
def test_a_bad_sweep_is_refused_naming_its_field(server, change, field):
    body = {"spec": {**sweep_spec([0.3]), **change}}
    r = httpx.post(server.url + "/api/v1/sweeps", json=body, headers=server.headers, timeout=30)
    assert r.status_code == 422, r.text
    assert [e["field"] for e in r.json()["details"]["errors"]][:1] == [field], r.text


def test_a_sweep_whose_trial_fits_no_node_is_refused_and_nothing_is_stored(server):
    spec = sweep_spec([0.3])
    spec["job"]["resources"] = {"cpu": 64}
    r = httpx.post(server.url + "/api/v1/sweeps", json={"spec": spec}, headers=server.headers, timeout=30)
    assert r.status_code in (409, 422) and "cpu" in r.text, r.text
    assert server.client().sweeps.list() == []


def test_cancelling_a_sweep_stops_its_running_trials(server):
    c = server.client()
    spec = sweep_spec([0.1, 0.2, 0.3], parallel=2)
    spec["parameters"].update(steps=100, pause=0.2)
    s = c.sweep(spec)
    running = _until(lambda: [t for t in c.sweeps.get(s.id).trials if t.state.value == "running"] or None)
    _until(lambda: c.get(running[0].job_id).status.value == "running" or None)
    gave_up = server.cli("sweep", "wait", s.id, "--timeout", "0.5")  # as timeout(1) and `trainyard wait` exit
    assert gave_up.returncode == 124 and f"timeout: sweep {s.id} still running" in gave_up.stderr, gave_up.stderr
    early = server.cli("serve", s.id, "--name", "too-early")  # no trial has finished: nothing to serve
    assert early.returncode == 1 and f"sweep {s.id} (quad) has no finished trial yet" in early.stderr, early.stderr
    assert c.services.list(include_ended=True) == []
    done = c.sweeps.cancel(s.id)
    assert done.status.value == "cancelled"
    # the loop may have been submitting a trial as the cancel came: it is stopped with the others
    assert {t.state.value for t in done.trials} == {"cancelled"} and 2 <= len(done.trials) <= 3
    for t in done.trials:
        assert c.job(t.job_id).wait(timeout=60).status == "cancelled"
        assert c.get(t.job_id).reason == f"the sweep was cancelled (sweep {s.id})"
    assert len(c.sweeps.get(s.id).trials) == len(done.trials)  # none starts after the cancel


def test_a_server_restarted_mid_sweep_goes_on_with_the_trials_it_has(tmp_path):
    srv = host_server(tmp_path / "home")
    try:
        c = srv.client()
        spec = sweep_spec([0.3, 0.5, 0.1], parallel=1)
        spec["parameters"].update(steps=6, pause=0.4)
        s = c.sweep(spec)
        _until(lambda: len(c.sweeps.get(s.id).trials) == 2 or None, timeout=60)  # trial 0 done, 1 running
        srv.stop()
        srv.start()
        info = srv.client().sweeps.wait(s.id, timeout=120)
        assert info.status.value == "succeeded", info.reason
        assert [(t.number, t.params["x"], t.state.value) for t in info.trials] == [
            (0, 0.3, "complete"), (1, 0.5, "complete"), (2, 0.1, "complete")]
        assert info.best.number == 0
    finally:
        srv.stop_all()


def _until(probe, timeout: float = 60.0):  # noqa: ANN001, ANN202
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError("timed out")
