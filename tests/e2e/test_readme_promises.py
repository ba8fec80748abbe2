"""What the README promises, through a real server and the CLI: retries, queues, pipelines' paths and cache."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from tests.e2e.helpers import py_job
from tests.support.servers import ServerProcess
from trainyard.errors import TrainyardError

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """One server for the module: these tests do not disturb one another."""
    s = ServerProcess(tmp_path_factory.mktemp("promises") / "home", ["--cpus", "2", "--memory", "4Gi"])
    s.start()
    yield s
    s.stop_all()


# -- retry.permanent_exit_codes: 2, 126 and 127 by default --------------------------------------------

@pytest.mark.parametrize("code, attempts", [(2, 1), (126, 1), (3, 2)])
def test_exit_codes_2_and_126_are_permanent_by_default_and_others_are_retried(srv, code, attempts):
    job = srv.client().submit(py_job(f"import sys; sys.exit({code})", retry={"max": 1, "backoff": 0, "on": ["error"]}))
    info = job.wait(timeout=60)
    assert info.status.value == "failed"
    assert [a.reason for a in info.attempts] == [f"Error(exit {code})"] * attempts


def test_a_command_bash_cannot_execute_exits_126_and_is_not_retried(srv, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "run.sh").write_text("#!/bin/sh\necho never\n")  # not executable
    job = srv.client().submit({"name": "noexec", "workdir": ".", "command": "./run.sh",
                               "retry": {"max": 2, "backoff": 0}}, base_dir=code)
    info = job.wait(timeout=60)
    assert info.status.value == "failed" and [a.reason for a in info.attempts] == ["Error(exit 126)"]


# -- queues from a file: `queue create -f` and `server --queues` ----------------------------------------

QUEUES = """\
queues:
  - name: team-a
    team: vision
    priority: 10
    quota: {cpu: 1, memory: 2Gi, gpu: {A100: 4, "*": 6}, jobs: 20}
    borrowing: false
  - name: team-b
    quota: {cpu: 2, jobs: 3}
"""


def queues_by_name(server) -> dict[str, dict]:
    r = server.cli("queue", "ls", "-o", "json")
    assert r.returncode == 0, r.stderr
    return {q["queue"]["name"]: q["queue"] for q in json.loads(r.stdout)}


def assert_queues_from_the_file(queues: dict[str, dict]) -> None:
    a, b = queues["team-a"], queues["team-b"]
    assert (a["team"], a["priority"], a["borrowing"]) == ("vision", 10, False)
    assert a["quota"]["cpu"] == 1 and a["quota"]["jobs"] == 20 and a["quota"]["gpu"] == {"A100": 4, "*": 6}
    assert a["quota"]["memory"] == 2 * 2**30
    assert b["team"] == "team-b" and b["quota"]["cpu"] == 2 and b["quota"]["jobs"] == 3


def test_queue_create_f_loads_every_queue_of_the_file_and_jobs_then_name_one(srv, tmp_path):
    spec = tmp_path / "queues.yaml"
    spec.write_text(QUEUES)
    r = srv.cli("queue", "create", "-f", str(spec))
    assert r.returncode == 0, r.stdout + r.stderr
    assert_queues_from_the_file(queues_by_name(srv))

    c = srv.client()
    with pytest.raises(TrainyardError, match="resources.memory"):  # team-a's quota counts memory: it is said
        c.submit(py_job("pass", queue="team-a"))
    job = py_job("print('in a')", queue="team-a", resources={"memory": "256Mi"})
    assert c.submit(job).wait(timeout=60).status.value == "succeeded"
    with pytest.raises(TrainyardError, match="nope"):
        c.submit(py_job("pass", queue="nope"))  # once queues exist, an unknown name is refused


def test_server_queues_loads_the_file_at_start(tmp_path):
    spec = tmp_path / "queues.yaml"
    spec.write_text(QUEUES)
    s = ServerProcess(tmp_path / "home", ["--cpus", "1", "--memory", "1Gi", "--queues", str(spec)])
    s.start()
    try:
        assert_queues_from_the_file(queues_by_name(s))
    finally:
        s.stop_all()


# -- pipelines: a fan-in reference with a path after it; outside inputs in the cache key -------------------

STEPS_PY = """\
import json, os, pathlib, sys
cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "train":   # a model folder: weights plus something the fan-in must not pick up
    out = pathlib.Path(args[1]); out.mkdir(parents=True)
    (out / "weights.pt").write_text(f"w{args[0]}")
    (out / "notes.txt").write_text("not weights")
elif cmd == "average":
    folder = pathlib.Path(args[0])
    entries = sorted(os.listdir(folder))
    pathlib.Path(args[1]).write_text(json.dumps({e: (folder / e).read_text() for e in entries}))
elif cmd == "count":
    pathlib.Path(args[1]).write_text(str(len(open(args[0]).read().split())))
"""

FAN_IN = """\
name: fanin
steps:
  train:
    foreach: 3
    command: python steps.py train {{item}} {{outputs.model}}
    outputs: [model]
  average:
    inputs: {weights: "{{steps.train.outputs.model}}/weights.pt"}
    command: python steps.py average {{inputs.weights}} {{outputs.summary}}
    outputs: [summary]
"""

OUTSIDE = """\
name: outside
steps:
  count:
    inputs: {data: ../outside/data.txt}   # outside the workdir: not in the code snapshot
    command: python steps.py count {{inputs.data}} {{outputs.n}}
    outputs: [n]
  other:
    command: python steps.py train 9 {{outputs.model}}
    outputs: [model]
"""


def write_pipeline(tmp_path, text: str):
    (tmp_path / "steps.py").write_text(STEPS_PY)
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


def artifact_text(client, step) -> str:
    [key] = step.artifacts.values()
    return open(client.pipelines.artifact(key).url.removeprefix("file://")).read()


def test_a_fan_in_reference_with_a_path_takes_that_path_inside_each_items_output(srv, tmp_path):
    c = srv.client()
    info = c.pipelines.run(write_pipeline(tmp_path, FAN_IN)).wait(timeout=120)
    steps = {s.name: s for s in info.steps}
    assert info.status.value == "succeeded", {n: (s.status, s.reason) for n, s in steps.items()}
    # entries 0, 1, 2 are each item's weights.pt: files, not the model folders
    assert json.loads(artifact_text(c, steps["average"])) == {"0": "w0", "1": "w1", "2": "w2"}


def test_an_outside_input_that_changes_invalidates_the_cache_of_the_steps_that_read_it(srv, tmp_path):
    c = srv.client()
    (tmp_path / "code").mkdir()
    (tmp_path / "outside").mkdir()
    pipeline = write_pipeline(tmp_path / "code", OUTSIDE)
    data = tmp_path / "outside" / "data.txt"
    data.write_text("a b c")

    first = c.pipelines.run(pipeline).wait(timeout=120)
    assert {s.name: s.status for s in first.steps} == {"count": "succeeded", "other": "succeeded"}
    again = c.pipelines.run(pipeline).wait(timeout=60)
    assert {s.name: s.status for s in again.steps} == {"count": "cached", "other": "cached"}

    data.write_text("a b c d e")  # another size, a later modification time
    os.utime(data, (data.stat().st_atime, data.stat().st_mtime + 10))
    changed = c.pipelines.run(pipeline).wait(timeout=120)
    steps = {s.name: s for s in changed.steps}
    assert {n: s.status for n, s in steps.items()} == {"count": "succeeded", "other": "cached"}
    assert artifact_text(c, steps["count"]) == "5"

    # same size, only the modification time: outside paths are hashed by size and mtime
    data.write_text("v w x y z")
    os.utime(data, (data.stat().st_atime, data.stat().st_mtime + 20))
    touched = c.pipelines.run(pipeline).wait(timeout=120)
    assert {s.name: s.status for s in touched.steps} == {"count": "succeeded", "other": "cached"}


# -- `make demo`'s job -------------------------------------------------------------------------------------

def test_the_demo_job_trains_through_a_server_and_its_model_downloads(srv, tmp_path):
    from sklearn.datasets import load_digits  # the demo extra; the dev extra has it too

    r = srv.cli("run", str(ROOT / "examples" / "digits" / "job.yaml"), "-p", "epochs=2", "--follow",
                timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    job_id = srv.client().jobs().items[0].id
    out = tmp_path / "demo-output"
    d = srv.cli("download", job_id, "--to", str(out))
    assert d.returncode == 0, d.stderr
    assert 0.5 < json.loads((out / "metrics.json").read_text())["test_accuracy"] <= 1
    model = pickle.loads((out / "model.pkl").read_bytes())
    X, y = load_digits(return_X_y=True)
    assert (model.predict(X[:200]) == y[:200]).mean() > 0.5


# -- a real server on PostgreSQL with a token of its own --------------------------------------------------

@pytest.mark.postgres
def test_a_server_on_postgresql_with_a_token_file_runs_a_job_end_to_end(tmp_path, pg_url):
    import httpx
    import psycopg

    from trainyard.errors import Unauthorized
    from trainyard.sdk.client import Client

    token = tmp_path / "token"
    token.write_text("a-token-of-our-own-0123456789abcdef\n")
    token.chmod(0o600)
    s = ServerProcess(tmp_path / "home", ["--cpus", "1", "--memory", "1Gi", "--token-file", str(token)], db=pg_url)
    s.start()
    try:
        assert httpx.get(s.url + "/api/v1/jobs", timeout=5).status_code == 401
        with pytest.raises(Unauthorized):
            Client(s.url, token="wrong").jobs()
        c = Client(s.url, token="a-token-of-our-own-0123456789abcdef")
        job = c.submit(py_job("import trainyard; print('on pg'); trainyard.log_metrics(step=1, acc=0.5)"))
        info = job.wait(timeout=60)
        assert info.status.value == "succeeded", job.logs()
        assert job.logs() == "on pg\n" and [(m.name, m.value) for m in job.metrics()] == [("acc", 0.5)]
        cli = s.cli("show", job.id, "-o", "json")  # the CLI with the home's token only: refused
        assert cli.returncode != 0 and "token" in cli.stderr.lower(), cli.stderr
        with psycopg.connect(pg_url) as conn:  # it is PostgreSQL that holds the job
            assert conn.execute("SELECT status FROM jobs WHERE id = %s", (job.id,)).fetchone() == ("succeeded",)
    finally:
        s.stop_all()
