"""A pipeline on real processes: fan-out/fan-in passing files, retry of what failed, caching, the CLI."""

import json
import sys

import pytest

pytestmark = pytest.mark.slow

STEPS_PY = '''\
import os, pathlib, sys
cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "split":
    out = pathlib.Path(args[0]); out.mkdir(parents=True)
    for i in range(int(args[1])):
        (out / str(i)).write_text(str((i + 1) * 10))
elif cmd == "train":
    shard, out, marker, index = args
    if index == "1" and not os.path.exists(marker):
        sys.exit("trainer 1: no marker yet")
    pathlib.Path(out).write_text(str(int(open(shard).read()) * 2))
elif cmd == "merge":
    models, out = pathlib.Path(args[0]), args[1]
    pathlib.Path(out).write_text(str(sum(int((models / p).read_text()) for p in sorted(os.listdir(models)))))
elif cmd == "evaluate":
    print("score", open(args[0]).read())
    pathlib.Path(args[1]).write_text("score " + open(args[0]).read())
'''

PIPELINE = '''\
name: e2e
params: {workers: 2, marker: MARKER}
steps:
  split:
    command: python steps.py split {{outputs.shards}} {{params.workers}}
    outputs: [shards]
  train:
    foreach: "{{params.workers}}"
    inputs: {shard: "{{steps.split.outputs.shards}}/{{item}}"}
    command: python steps.py train {{inputs.shard}} {{outputs.model}} {{params.marker}} {{index}}
    outputs: [model]
    resources: {cpu: 1}
  merge:
    inputs: {models: "{{steps.train.outputs.model}}"}
    command: python steps.py merge {{inputs.models}} {{outputs.model}}
    outputs: [model]
  evaluate:
    command: python steps.py evaluate {{steps.merge.outputs.model}} {{outputs.report}}
    outputs: [report]
'''


def show(server, run_id):
    r = server.cli("pipeline", "show", run_id, "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_fan_out_fan_in_then_retry_only_what_failed_then_all_cached(server, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "steps.py").write_text(STEPS_PY)
    marker = tmp_path / "marker"
    pipeline = code / "p.yaml"
    pipeline.write_text(PIPELINE.replace("MARKER", str(marker)))

    # trainer 1 fails: merge and evaluate are skipped, the run fails, --follow exits 1
    r = server.cli("pipeline", "run", str(pipeline), "--follow")
    assert r.returncode == 1, r.stdout + r.stderr
    run_id = r.stderr.split("started ", 1)[1].split()[0]
    first = show(server, run_id)
    states = {s["name"]: s["status"] for s in first["steps"]}
    assert states == {"split": "succeeded", "train-0": "succeeded", "train-1": "failed", "merge": "skipped",
                      "evaluate": "skipped"}
    assert "train-1" in first["reason"]
    # each step's job is labelled with its run and its step (a foreach step's items share the step)
    trainers = server.cli("ls", "-l", f"trainyard.io/pipeline-run={run_id},trainyard.io/step=train", "--ids")
    assert sorted(trainers.stdout.split()) == sorted(s["job_id"] for s in first["steps"] if s["step"] == "train")
    failed = server.cli("pipeline", "wait", run_id)  # ended: its tree, how it ended, the exit code of --follow
    assert failed.returncode == 1 and f"{run_id} failed" in failed.stderr, failed.stderr

    # retry re-runs train-1 and what follows only
    marker.write_text("ok")
    r = server.cli("pipeline", "retry", run_id, "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    assert server.cli("pipeline", "wait", run_id).returncode == 0
    after = show(server, run_id)
    before_jobs = {s["name"]: s["job_id"] for s in first["steps"]}
    after_jobs = {s["name"]: s["job_id"] for s in after["steps"]}
    assert after_jobs["split"] == before_jobs["split"] and after_jobs["train-0"] == before_jobs["train-0"]
    assert after_jobs["train-1"] != before_jobs["train-1"]
    assert {s["status"] for s in after["steps"]} == {"succeeded"}
    report_id = {s["name"]: s for s in after["steps"]}["evaluate"]["artifacts"]["report"]
    c = server.client()
    art = c.pipelines.artifact(report_id)
    assert open(art.url.removeprefix("file://")).read() == "score 60"
    lineage = server.cli("artifact", "show", art.digest[:20])
    assert lineage.returncode == 0 and after_jobs["evaluate"] in lineage.stdout and "merge.model" in lineage.stdout
    merge_art = c.pipelines.artifact(art.inputs["step_merge_model"]["artifacts"][0])
    assert merge_art.job_id == after_jobs["merge"] and merge_art.code and merge_art.code == art.code

    # the same pipeline again: every step cached, no job runs
    jobs_before = len(c.jobs(limit=100).items)
    r = server.cli("pipeline", "run", str(pipeline))
    assert r.returncode == 0, r.stderr
    info = c.pipelines.wait(r.stdout.strip(), timeout=30)
    assert info.status.value == "succeeded" and {s.status for s in info.steps} == {"cached"}
    assert len(c.jobs(limit=100).items) == jobs_before
    listed = json.loads(server.cli("pipeline", "ls", "-o", "json").stdout)
    assert [x["id"] for x in listed] == [info.id, run_id]
    # --ids pages like `trainyard ls`: --limit, then --after where it stopped, or --all
    first = server.cli("pipeline", "ls", "--ids", "-n", "1")
    assert first.stdout.split() == [info.id] and "1 shown; more: add --after" in first.stderr, first.stderr
    cursor = first.stderr.split("--after ")[1].split()[0]
    assert server.cli("pipeline", "ls", "--ids", "--after", cursor).stdout.split() == [run_id]
    assert server.cli("pipeline", "ls", "--ids", "-n", "1", "--all").stdout.split() == [info.id, run_id]


def test_cancel_stops_every_running_step_and_starts_nothing_more(server, tmp_path):
    import psutil

    from tests.e2e.helpers import until

    pids = tmp_path / "pids"
    pids.mkdir()
    slow = f"import os, time; open(os.path.join({str(pids)!r}, os.environ['TRAINYARD_ITEM']), 'w').write(str(os.getpid())); time.sleep(60)"
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        "steps:\n"
        f"  slow:\n    foreach: 2\n    command: [{sys.executable}, -c, {json.dumps(slow)}]\n"
        "    resources: {cpu: 1}\n    grace_period: 2\n"
        "  after:\n    needs: [slow]\n    command: echo never\n")
    run_id = server.cli("pipeline", "run", str(pipeline)).stdout.strip()
    written = lambda: [p.read_text() for p in pids.iterdir()]  # noqa: E731
    procs = [int(t) for t in until(lambda: len(written()) == 2 and all(written()) and written(), timeout=30)]
    r = server.cli("pipeline", "rm", run_id)
    assert r.returncode == 1 and "it is running: cancel it first" in r.stderr, r.stderr
    r = server.cli("pipeline", "cancel", run_id)
    assert r.returncode == 0, r.stderr
    info = server.client().pipelines.wait(run_id, timeout=30)
    assert info.status.value == "cancelled"
    assert [s.status for s in info.steps] == ["cancelled", "cancelled", "cancelled"]
    until(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                          for p in procs), timeout=10)
    assert info.step("after").job_id is None
    # an ended run goes with its steps' jobs and their folders
    folders = [server.home / "attempts" / a.id for s in info.steps if s.job_id
               for a in server.client().get(s.job_id).attempts]
    assert len(folders) == 2 and all(f.is_dir() for f in folders)
    assert server.cli("pipeline", "ls", "-s", "cancelled", "--ids").stdout.split() == [run_id]
    assert server.cli("pipeline", "ls", "--ids", "--before", "1h").stdout == ""  # none started over an hour ago
    assert server.cli("pipeline", "ls", "--ids", "--before", "2999-01-01").stdout.split() == [run_id]
    bad = server.cli("pipeline", "ls", "--before", "soon")
    assert bad.returncode == 2 and "--before: 'soon'" in bad.stderr, bad.stderr
    r = server.cli("pipeline", "rm", run_id, "p-nothere00")
    assert r.returncode == 1 and r.stdout.strip() == f"deleted pipeline run {run_id}", r.stderr
    assert "p-nothere00" in r.stderr and "1 of 2 not deleted" in r.stderr
    assert not any(f.exists() for f in folders)
    assert server.cli("pipeline", "show", run_id).returncode == 1
    assert all(server.cli("show", s.job_id).returncode == 1 for s in info.steps if s.job_id)


def test_a_bad_pipeline_is_refused_with_its_line_and_nothing_runs(server, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps:\n  a:\n    command: echo a\n    needs: [b]\n  b:\n    command: echo b\n    needs: [a]\n")
    r = server.cli("pipeline", "run", str(bad))
    assert r.returncode == 2 and f"{bad}:4 steps.a.needs: cycle: a → b → a" in r.stderr, r.stderr
    assert json.loads(server.cli("pipeline", "ls", "-o", "json").stdout) == []
    assert json.loads(server.cli("ls", "-o", "json").stdout) == []


LOGS_PIPELINE = '''\
name: logs
steps:
  t:
    foreach: 2
    command: python -c "import sys; print('item says', {{item}}); sys.exit({{item}})"
  after:
    needs: [t]
    command: echo after
'''


def test_pipeline_logs_prints_a_steps_log_and_a_failed_run_says_how_to_read_it(server, tmp_path):
    # a failed step's log was to be found by its job id in the tree, with `trainyard logs JOB`
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(LOGS_PIPELINE)
    r = server.cli("pipeline", "run", str(pipeline), "--wait")  # as `trainyard run --wait` says it
    assert r.returncode == 1, r.stdout + r.stderr
    run_id = r.stderr.split("started ", 1)[1].split()[0]
    assert f"its log: trainyard pipeline logs {run_id} t-1" in r.stderr, r.stderr

    shown = server.cli("pipeline", "logs", run_id, "t-1")
    assert shown.returncode == 0 and "item says 1" in shown.stdout, shown.stdout + shown.stderr
    foreach = server.cli("pipeline", "logs", run_id, "t")
    assert foreach.returncode == 2 and "is a foreach: name one of its 2 items (t-0 … t-1)" in foreach.stderr
    typo = server.cli("pipeline", "logs", run_id, "aftr")
    assert typo.returncode == 2 and "has no step 'aftr'; did you mean after?" in typo.stderr, typo.stderr
    skipped = server.cli("pipeline", "logs", run_id, "after")
    assert skipped.returncode == 1 and f"step after of {run_id} ran no job: skipped" in skipped.stderr


def test_a_run_is_named_by_its_name_too_the_newest_of_that_name(server, tmp_path):
    # given two runs of one pipeline name, the second changed so that it runs again (not cached)
    pipeline = tmp_path / "named.yaml"
    started = []
    for word in ("first", "second"):
        pipeline.write_text(f"name: named-twice\nsteps:\n  say:\n    command: echo {word}\n")
        r = server.cli("pipeline", "run", str(pipeline), "--wait")
        assert r.returncode == 0, r.stdout + r.stderr
        started.append(r.stderr.split("started ", 1)[1].split()[0])
    first, second = started
    # then the run's commands read the newest by its name, and say which
    shown = server.cli("pipeline", "show", "named-twice", "-o", "json")
    assert json.loads(shown.stdout)["id"] == second
    assert shown.stderr == (f"named-twice: the newest run of that name, {second} "
                            "(`trainyard pipeline ls --name named-twice` lists them)\n")
    assert server.cli("pipeline", "logs", "named-twice", "say").stdout == "second\n"
    assert server.cli("pipeline", "logs", first, "say").stdout == "first\n"
    events = [json.loads(server.cli("events", "--pipeline", "-o", "json", ref).stdout)
              for ref in ("named-twice", second, first)]
    assert events[0] == events[1] != events[2]
    # pipeline ls --name lists exactly those; an unknown name fails naming both readings
    assert server.cli("pipeline", "ls", "--name", "named-twice", "--ids").stdout == f"{second}\n{first}\n"
    missing = server.cli("pipeline", "show", "nosuch")
    assert missing.returncode == 1 and "no such pipeline run: nosuch (neither a run id nor the name" in missing.stderr
