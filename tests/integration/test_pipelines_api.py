"""The pipeline runner in-process with the fake engine, through the REST API and SDK, on SQLite and PostgreSQL.

Each test plays the launcher: it writes a step's outputs where the launcher
would upload them and reports the result, so what the runner does next
(submit, cache, fan in, skip, retry, cancel) is what is checked.
"""

import hashlib

import pytest
from fastapi.testclient import TestClient

from trainyard import errors
from trainyard.api.app import create_app
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.launch.files import local_path
from trainyard.sdk.client import Client
from trainyard.services.platform import Platform
from trainyard.spec.records import NodeInfo
from tests.support.waiting import until

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]

PIPELINE = {
    "name": "fan",
    "params": {"workers": 2, "epochs": 1},
    "steps": {
        "split": {"command": "split --n {{params.workers}} --out {{outputs.shards}}", "outputs": ["shards"]},
        "train": {
            "foreach": "{{params.workers}}",
            "inputs": {"shard": "{{steps.split.outputs.shards}}/{{item}}"},
            "command": "train {{inputs.shard}} --epochs {{params.epochs}} --out {{outputs.model}}",
            "outputs": ["model"],
        },
        "merge": {
            "inputs": {"models": "{{steps.train.outputs.model}}", "note": {"value": "hello"}},
            "command": "merge {{inputs.models}} {{outputs.model}}",
            "outputs": ["model"],
        },
    },
}


@pytest.fixture
def env(db_url, tmp_path):
    engine = FakeEngine(NODES)
    platform = Platform(ServerSettings(home=tmp_path / "home", db=db_url), engine=engine)
    with TestClient(create_app(platform, "http://testserver")) as tc:
        yield tc, Client("http://testserver", transport=tc._transport), engine


def attempt_of(engine, job_id):
    return until(lambda: next((a for a in engine.launched if a.startswith(job_id + "-")), None), timeout=10)


def finish(tc, engine, job_id, files=None, exit_code=0):
    """Be the launcher: write ``files`` (path -> bytes) as uploaded outputs, report the exit."""
    attempt_id = attempt_of(engine, job_id)
    out = local_path(engine.launched[attempt_id][0].output_url)
    records = []
    for rel, data in (files or {}).items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
        records.append({"path": rel, "size": len(data), "digest": "sha256:" + hashlib.sha256(data).hexdigest()})
    url = f"/internal/attempts/{attempt_id}/replicas/0/report"
    headers = engine.launcher_headers(attempt_id)
    assert tc.post(url, json={"phase": "running", "pid": 1}, headers=headers).status_code == 200
    reason = "Succeeded" if exit_code == 0 else f"Error(exit {exit_code})"
    r = tc.post(url, headers=headers, json={"phase": "exited", "pid": 1,
                                            "result": {"exit_code": exit_code, "reason": reason, "outputs": records}})
    assert r.status_code == 200, r.text


def step_job(run, name):
    return until(lambda: run.step(name).job_id, timeout=10)


def play(tc, engine, run, models=(b"m0", b"m1"), fail=()):
    finish(tc, engine, step_job(run, "split"), {f"shards/{i}": f"s{i}".encode() for i in range(len(models))})
    for i, m in enumerate(models):
        name = f"train-{i}"
        if name in fail:
            finish(tc, engine, step_job(run, name), exit_code=3)
        else:
            finish(tc, engine, step_job(run, name), {"model": m})


def test_fan_out_and_fan_in_with_workers_from_a_param(env, tmp_path):
    tc, sdk, engine = env
    run = sdk.pipelines.run(PIPELINE, {"workers": 3})
    assert [s.name for s in run.info.steps] == ["split", "train-0", "train-1", "train-2", "merge"]
    split = attempt_of(engine, step_job(run, "split"))
    cfg = engine.launched[split][0]
    assert cfg.command[-1] == "split --n 3 --out {{outputs.shards}}" and cfg.env["TRAINYARD_OUTPUT_NAMES"] == "shards"
    assert len(engine.launched) == 1  # nothing else before split succeeded
    play(tc, engine, run, models=(b"m0", b"m1", b"m2"))
    cfgs = [engine.launched[attempt_of(engine, run.step(f"train-{i}").job_id)][0] for i in range(3)]
    assert [local_path(c.inputs["shard"]).read_text() for c in cfgs] == ["s0", "s1", "s2"]
    merge_job = step_job(run, "merge")
    merge_cfg = engine.launched[attempt_of(engine, merge_job)][0]
    models = local_path(merge_cfg.inputs["models"])
    assert sorted(p.name for p in models.iterdir()) == ["0", "1", "2"]
    assert (models / "2").read_bytes() == b"m2"
    assert local_path(merge_cfg.inputs["note"]).read_text() == "hello"
    finish(tc, engine, merge_job, {"model/w.bin": b"avg", "model/meta.json": b"{}"})
    info = run.wait(timeout=10)
    assert info.status.value == "succeeded" and {s.status for s in info.steps} == {"succeeded"}
    art = sdk.pipelines.artifact(info.step("merge").artifacts["model"])
    assert art.files == 2 and art.job_id == merge_job and art.output == "model"
    assert art.inputs["models"]["artifacts"] == [info.step(f"train-{i}").artifacts["model"] for i in range(3)]
    assert sdk.pipelines.artifact(art.digest.removeprefix("sha256:")[:12]).id == art.id
    dest = sdk.pipelines.download(art.id, tmp_path / "got")
    assert (dest / "w.bin").read_bytes() == b"avg" and (dest / "meta.json").read_bytes() == b"{}"
    shard = sdk.pipelines.artifact(info.step("train-2").artifacts["model"])
    assert sdk.pipelines.download(shard.id, tmp_path / "m2").read_bytes() == b"m2"


def test_a_second_run_is_all_cached_and_a_changed_param_reruns_only_what_depends_on_it(env):
    tc, sdk, engine = env
    first = sdk.pipelines.run(PIPELINE)
    play(tc, engine, first)
    finish(tc, engine, step_job(first, "merge"), {"model": b"avg"})
    assert first.wait(timeout=10).status.value == "succeeded"
    launched = len(engine.launched)
    again = sdk.pipelines.run(PIPELINE).wait(timeout=10)
    assert again.status.value == "succeeded" and {s.status for s in again.steps} == {"cached"}
    assert len(engine.launched) == launched
    assert again.step("merge").cached_from == first.info.step("merge").job_id
    # epochs is used by train only: split stays cached; train runs again
    third = sdk.pipelines.run(PIPELINE, {"epochs": 5})
    assert until(lambda: third.step("train-0").job_id)
    assert third.step("split").status == "cached"
    for i in range(2):
        finish(tc, engine, third.step(f"train-{i}").job_id, {"model": f"new{i}".encode()})
    finish(tc, engine, step_job(third, "merge"), {"model": b"avg2"})
    assert third.wait(timeout=10).status.value == "succeeded"
    # same trained models as before: merge would be cached; with cache: false it is not
    spec = {**PIPELINE, "steps": {**PIPELINE["steps"], "merge": {**PIPELINE["steps"]["merge"], "cache": False}}}
    fourth = sdk.pipelines.run(spec)
    assert step_job(fourth, "merge") and fourth.step("train-1").status == "cached"
    # one more worker: split runs again, but shards 0 and 1 hold what they held, so their trainers stay cached
    fifth = sdk.pipelines.run(PIPELINE, {"workers": 3})
    finish(tc, engine, step_job(fifth, "split"), {f"shards/{i}": f"s{i}".encode() for i in range(3)})
    assert step_job(fifth, "train-2")
    assert [fifth.step(f"train-{i}").status for i in range(2)] == ["cached", "cached"]


def test_retry_after_a_failed_trainer_reruns_only_it_and_what_follows(env):
    tc, sdk, engine = env
    run = sdk.pipelines.run(PIPELINE)
    play(tc, engine, run, fail=("train-1",))
    info = run.wait(timeout=10)
    assert info.status.value == "failed" and "train-1" in info.reason
    assert [(s.name, s.status) for s in info.steps] == [
        ("split", "succeeded"), ("train-0", "succeeded"), ("train-1", "failed"), ("merge", "skipped")]
    kept = {n: info.step(n).job_id for n in ("split", "train-0")}
    failed_job = info.step("train-1").job_id
    running = sdk.pipelines.run(PIPELINE).id
    with pytest.raises(errors.Conflict, match=f"run {running} is still running: retry it once it has ended"):
        sdk.pipelines.retry(running)  # a running run: nothing to retry
    run.retry()
    new_job = until(lambda: (j := run.step("train-1").job_id) and j != failed_job and j)
    assert {n: run.step(n).job_id for n in kept} == kept
    finish(tc, engine, new_job, {"model": b"m1"})
    finish(tc, engine, step_job(run, "merge"), {"model": b"avg"})
    info = run.wait(timeout=10)
    assert info.status.value == "succeeded" and info.retries == 1
    assert info.step("train-1").jobs == [failed_job]
    with pytest.raises(errors.Conflict, match=f"run {run.id} succeeded: nothing to run again"):
        run.retry()


def test_cancel_cascades_to_running_steps_and_stops_the_rest(env):
    tc, sdk, engine = env
    run = sdk.pipelines.run(PIPELINE)
    finish(tc, engine, step_job(run, "split"), {"shards/0": b"a", "shards/1": b"b"})
    trains = [step_job(run, f"train-{i}") for i in range(2)]
    for j in trains:
        attempt = attempt_of(engine, j)
        tc.post(f"/internal/attempts/{attempt}/replicas/0/report", json={"phase": "running", "pid": 1},
                headers=engine.launcher_headers(attempt))
    run.cancel()
    assert sorted(engine.cancelled) == sorted(attempt_of(engine, j) for j in trains)
    for j in trains:
        attempt = attempt_of(engine, j)
        tc.post(f"/internal/attempts/{attempt}/replicas/0/report", headers=engine.launcher_headers(attempt),
                json={"phase": "exited", "pid": 1, "result": {"exit_code": -15, "reason": "Cancelled"}})
    info = run.wait(timeout=10)
    assert info.status.value == "cancelled"
    assert [s.status for s in info.steps] == ["succeeded", "cancelled", "cancelled", "cancelled"]
    assert sdk.get(trains[0]).status.value == "cancelled"


def test_a_step_that_does_not_write_its_output_fails_naming_it(env):
    tc, sdk, engine = env
    run = sdk.pipelines.run({"steps": {"a": {"command": "x", "outputs": ["model"]}}})
    finish(tc, engine, step_job(run, "a"))
    info = run.wait(timeout=10)
    assert info.status.value == "failed" and "did not write output(s): model" in info.step("a").reason


@pytest.mark.parametrize("steps, field, message", [
    ({"a": {"command": "x", "needs": ["b"]}, "b": {"command": "y", "needs": ["a"]}}, "steps.a.needs", "cycle: a → b → a"),
    ({"a": {"command": "x", "needs": ["nope"]}}, "steps.a.needs", "unknown step 'nope'"),
    ({"a": {"command": "x", "outputs": ["m"]}, "b": {"command": "y", "inputs": {"m": "{{steps.a.outputs.w}}"}}},
     "steps.b.inputs.m", "step 'a' has no output 'w' (it has: m)"),
    ({"a": {"command": "x", "resources": {"cpu": 64}}}, "steps.a.resources.cpu", "64"),
    # each foreach within its bound, the run's jobs past theirs: refused before a row of them is made
    ({"a": {"command": "x", "foreach": 10_000}, "b": {"command": "y", "foreach": 10_000}}, "steps.b.foreach",
     "20000 step jobs (each foreach item is one), more than the 10000 a run may make"),
    # job fields of the wrong type: the job's check names them (the reference checks after it were a 500)
    ({"a": {"command": "x", "env_vars": ["A=1"]}}, "steps.a.env_vars", "valid dictionary"),
    ({"a": {"command": ["echo", 1]}}, "steps.a.command.1", "valid string"),
])
def test_bad_pipelines_are_rejected_before_anything_runs(env, steps, field, message):
    tc, sdk, engine = env
    r = tc.post("/api/v1/pipelines", json={"spec": {"steps": steps}})
    assert r.status_code == 422, r.text
    errs = r.json()["details"]["errors"]
    assert any(e["field"] == field and message in e["message"] for e in errs), errs
    assert sdk.pipelines.list().items == [] and sdk.jobs().items == [] and engine.launched == {}


def test_yaml_a_spec_cannot_store_as_json_is_text_or_a_422_naming_its_line(env):
    tc, sdk, engine = env
    yaml_text = {"Content-Type": "application/yaml"}
    # a date is the text as written (JSON has no dates): it was a 500 at the run's INSERT
    text = "params: {d: 2024-01-01}\nsteps:\n  a:\n    command: echo {{params.d}}\n    name: 2024-01-01\n"
    r = tc.post("/api/v1/pipelines", content=text, headers=yaml_text)
    assert r.status_code == 201, r.text
    run = sdk.pipelines.get(r.json()["id"])
    assert run.params == {"d": "2024-01-01"} and sdk.get(step_job(run, "a")).spec.argv()[-1] == "echo 2024-01-01"
    # bytes and a list as a key are refused where they are written (a TypeError, a 500, once)
    for text, field, line in [("steps:\n  a:\n    command: !!binary aGVsbG8=\n", "steps.a.command", 3),
                              ("steps:\n  a:\n    command: x\n    ? [a, b]\n    : 1\n", "steps.a", 4),
                              ("steps:\n  a:\n    command: x\n    env_vars: [A=1]\n", "steps.a.env_vars", 4)]:
        r = tc.post("/api/v1/pipelines?dry_run=true", content=text, headers=yaml_text)
        assert r.status_code == 422, r.text
        assert [(e["field"], e["line"]) for e in r.json()["details"]["errors"]] == [(field, line)]
    assert len(sdk.pipelines.list().items) == 1


def test_a_restarted_server_picks_up_its_runs_where_they_were(db_url, tmp_path):
    settings = ServerSettings(home=tmp_path / "home", db=db_url)
    engine = FakeEngine(NODES)
    with TestClient(create_app(Platform(settings, engine=engine), "http://testserver")) as tc:
        run = Client("http://testserver", transport=tc._transport).pipelines.run(PIPELINE)
        split_job = step_job(run, "split")
        attempt_of(engine, split_job)
    engine = FakeEngine(NODES)  # the new server's engine launches the attempt it finds again
    with TestClient(create_app(Platform(settings, engine=engine), "http://testserver")) as tc:
        sdk = Client("http://testserver", transport=tc._transport)
        run = sdk.pipelines.run_handle(run.id)
        finish(tc, engine, split_job, {"shards/0": b"a", "shards/1": b"b"})
        assert step_job(run, "train-0") and step_job(run, "train-1")


def test_input_paths_are_taken_from_the_pipeline_folder_with_params_put_in(env, tmp_path):
    tc, sdk, engine = env
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "data" / "en.txt").write_text("hello")
    p = proj / "p.yaml"
    p.write_text("params: {lang: en}\nsteps:\n  a:\n    inputs: {text: 'data/{{params.lang}}.txt'}\n"
                 "    command: cat {{inputs.text}}\n")
    run = sdk.pipelines.run(p)
    cfg = engine.launched[attempt_of(engine, step_job(run, "a"))][0]
    assert cfg.inputs["text"] == str(proj / "data" / "en.txt") and cfg.snapshot  # the folder is the workdir
    with pytest.raises(errors.InvalidSpec) as exc:
        sdk.pipelines.run(p, {"lang": "fr"})
    assert exc.value.errors[0]["field"] == "steps.a.inputs.text" and "does not exist" in exc.value.errors[0]["message"]


def test_a_failed_step_says_what_its_attempt_said_not_only_the_reason(env):
    # MissingOutput alone named no output, ImagePullFailed no image: the tree and --follow show only this reason
    tc, sdk, engine = env
    run = sdk.pipelines.run({"steps": {"a": {"command": "x", "outputs": ["model"]}}})
    attempt = attempt_of(engine, step_job(run, "a"))
    url, headers = f"/internal/attempts/{attempt}/replicas/0/report", engine.launcher_headers(attempt)
    tc.post(url, json={"phase": "running", "pid": 1}, headers=headers)
    said = "output 'model' was not written (at {{outputs.model}} = $TRAINYARD_OUTPUT_DIR/model)"
    tc.post(url, headers=headers, json={"phase": "exited", "pid": 1,
                                        "result": {"exit_code": 0, "reason": "MissingOutput", "message": said}})
    info = run.wait(timeout=10)
    assert info.step("a").reason.endswith(f"MissingOutput (not retried): {said}"), info.step("a").reason
    assert said in info.reason


def test_runs_are_listed_by_exact_name_newest_first_beside_the_part_of_a_name(env):
    tc, sdk, _ = env
    one_step = {"steps": {"a": {"command": "true"}}}
    older, other, newer = (sdk.pipelines.run({"name": n, **one_step}) for n in ("fan", "fan-out", "fan"))
    # exact: the two runs named fan, newest first
    assert [r.id for r in sdk.pipelines.list(name="fan").items] == [newer.id, older.id]
    assert sdk.pipelines.list(name="FAN").items == [] and sdk.pipelines.list(name="fa").items == []
    # the part of a name, any case, as before
    got = tc.get("/api/v1/pipelines", params={"name": "FAN"}).json()["items"]
    assert [r["id"] for r in got] == [newer.id, other.id, older.id]
    assert tc.get("/api/v1/pipelines", params={"exact_name": "\x00"}).status_code == 422
