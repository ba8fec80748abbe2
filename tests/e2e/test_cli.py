"""The `trainyard` command against a real server, and the embedded default."""

import json
import os
import subprocess
import sys
import time

import pytest

from trainyard.launch import cgroup

pytestmark = pytest.mark.slow


def write_spec(tmp_path, text: str, name: str = "job.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_run_follow_streams_and_run_wait_returns_and_both_exit_with_the_job_status(server, tmp_path):
    ok = write_spec(tmp_path, f"name: ok\ncommand: [{sys.executable}, -c, 'print(\"hi {{{{params.who}}}}\")']\n"
                              "params: {who: me}\n")
    r = server.cli("run", str(ok), "-p", "who=you", "--follow")
    assert r.returncode == 0, r.stderr
    assert "hi you" in r.stdout
    bad = write_spec(tmp_path, "name: bad\ncommand: exit 4\n", "bad.yaml")
    # no logs: the id on stdout, how it ended on stderr; a plain `run SPEC --wait` goes the quick way
    r = server.cli("run", str(bad), "--wait", env={"PYTHONPROFILEIMPORTTIME": "1"})
    loaded = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    # nor yaml (the spec is read as text), http.client or ssl (the plain connection, to this machine)
    assert r.returncode == 1 and loaded and loaded.isdisjoint({"typer", "pydantic", "httpx", "yaml", "http.client",
                                                               "ssl"})
    said = [line for line in r.stderr.splitlines() if not line.startswith("import time:")]
    job_id = r.stdout.strip()
    assert server.client().get(job_id).status.value == "failed" and "Error(exit 4)" in said[0]
    full = server.cli("run", str(bad), "-w", "--name", "bad")  # a flag more: the full CLI, saying the same
    assert full.returncode == 1 and full.stderr.replace(full.stdout.strip(), job_id).strip() == said[0]
    # a spec that is not valid goes to the server as text, which refuses it: the full CLI then names the
    # line, as it does for every spec, and nothing was submitted
    jobs = len(server.client().jobs(limit=100).items)
    for text, said in (("name: broken\ncommand: [unclosed\n", "broken.yaml:3: not valid YAML"),
                       ("- not a mapping\n", "broken.yaml:1"),
                       ("name: typo\ncommand: x\nresources: {cpus: 2}\n", "broken.yaml:3 resources.cpus: unknown")):
        r = server.cli("run", str(write_spec(tmp_path, text, "broken.yaml")), "--wait")
        assert r.returncode == 2 and said in r.stderr and not r.stdout, (text, r.stdout, r.stderr)
    assert len(server.client().jobs(limit=100).items) == jobs


def test_run_follow_goes_the_quick_way_and_prints_what_the_full_cli_prints(server, tmp_path):
    # lines, a metric, a last line without its newline, a failing exit: every part of what --follow prints
    code = ("from trainyard import log_metrics\nfor i in range(50): print('line', i, flush=True)\n"
            "log_metrics(step=1, loss=0.25)\nimport sys; sys.stdout.write('no newline'); sys.exit(3)")
    spec = write_spec(tmp_path, f"name: lines\ncommand: [{sys.executable}, -c, {json.dumps(code)}]\n")
    quick = server.cli("run", str(spec), "--follow", env={"PYTHONPROFILEIMPORTTIME": "1"})
    loaded = {line.split("|")[-1].strip() for line in quick.stderr.splitlines() if line.startswith("import time:")}
    assert quick.returncode == 1 and loaded and loaded.isdisjoint({"typer", "pydantic", "httpx"})
    full = server.cli("run", str(spec), "--follow", "--name", "lines")  # a flag more: the full CLI
    assert full.returncode == 1
    assert quick.stdout == full.stdout
    assert quick.stdout.startswith("".join(f"line {i}\n" for i in range(50)) + "no newline")
    assert "loss" in quick.stdout
    said = [line for line in quick.stderr.splitlines() if not line.startswith("import time:")]
    job_ids = [line.split()[1] for line in (said[0], full.stderr.splitlines()[0])]
    assert [line.replace(job_ids[0], "J") for line in said] == \
        [line.replace(job_ids[1], "J") for line in full.stderr.splitlines()]
    assert "failed" in said[-1] and "exit 3" in said[-1]


def test_run_returns_the_id_at_once_and_show_ls_nodes_speak_json(server, tmp_path):
    spec = write_spec(tmp_path, "name: sleepy\ncommand: sleep 2\nresources: {gpu: 1}\n")
    t = time.monotonic()
    r = server.cli("run", str(spec))
    assert r.returncode == 0 and time.monotonic() - t < 10
    job_id = r.stdout.strip()
    shown = json.loads(server.cli("show", job_id, "-o", "json").stdout)
    assert shown["id"] == job_id and shown["spec"]["resources"]["gpu"] == 1
    listed = json.loads(server.cli("ls", "-o", "json").stdout)
    assert [j["id"] for j in listed] == [job_id]
    nodes = json.loads(server.cli("nodes", "-o", "json").stdout)
    assert nodes[0]["gpu"] == 4 and nodes[0]["gpu_type"] == "A100"
    assert nodes[0]["memory_enforcement"] == cgroup.detect()  # cgroup-v1 on CI
    assert cgroup.detect() in server.cli("nodes").stdout
    table = server.cli("show", job_id).stdout
    assert "sleepy" in table and "attempts" in table
    assert server.cli("cancel", job_id).returncode == 0


def test_an_invalid_spec_names_the_line_and_stores_nothing(server, tmp_path):
    spec = write_spec(tmp_path, "name: x\ncommand: echo\nresources:\n  memory: lots\n")
    r = server.cli("run", str(spec))
    assert r.returncode == 2
    assert f"{spec}:4 resources.memory" in r.stderr
    too_big = write_spec(tmp_path, "command: echo\nresources: {gpu: 9}\n", "big.yaml")
    r = server.cli("run", str(too_big))
    assert r.returncode == 2 and f"{too_big}:2 resources.gpu: asks for 9 GPUs" in r.stderr  # as the file's errors
    typed = write_spec(tmp_path, "command: echo\nint: 1\n", "typed.yaml")  # a key spelled like a type
    r = server.cli("run", str(typed))
    assert r.returncode == 2 and f"{typed}:2 int: unknown field 'int'" in r.stderr and "Traceback" not in r.stderr
    nan = write_spec(tmp_path, "command: echo\nresources: {cpu: nan}\n", "nan.yaml")
    r = server.cli("run", str(nan))
    assert r.returncode == 2 and f"{nan}:2 resources.cpu" in r.stderr
    assert json.loads(server.cli("ls", "-o", "json").stdout) == []


def test_the_first_call_starts_a_local_server_and_later_calls_reuse_it(tmp_path):
    env = {**os.environ, "TRAINYARD_HOME": str(tmp_path / "home")}
    env.pop("TRAINYARD_SERVER", None)
    spec = write_spec(tmp_path, f"command: [{sys.executable}, -c, 'print(42)']\n")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "trainyard", *args], env=env, capture_output=True,
                              text=True, timeout=120)

    try:
        first = cli("run", str(spec), "--follow")
        assert first.returncode == 0 and "42" in first.stdout, first.stderr
        pid = json.loads((tmp_path / "home" / "server.json").read_text())["pid"]
        assert cli("ls").returncode == 0
        assert json.loads((tmp_path / "home" / "server.json").read_text())["pid"] == pid
        assert (tmp_path / "home" / "trainyard.db").exists()
    finally:
        assert cli("server", "stop").returncode == 0
    assert not (tmp_path / "home" / "server.json").exists()


def test_the_first_call_says_that_it_starts_a_local_server_and_later_calls_do_not(tmp_path):
    # the first command on a machine waited seconds for the embedded server without a word
    home = tmp_path / "home"
    env = {**os.environ, "TRAINYARD_HOME": str(home)}
    env.pop("TRAINYARD_SERVER", None)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "trainyard", *args], env=env, capture_output=True,
                              text=True, timeout=120)

    try:
        first = cli("pipeline", "ls")
        assert first.returncode == 0, first.stderr
        assert f"starting a local trainyard server for {home} (its log: {home / 'server.log'})" in first.stderr
        assert "the local trainyard server is up at http://127.0.0.1:" in first.stderr, first.stderr
        again = cli("pipeline", "ls")
        assert again.returncode == 0 and "local trainyard server" not in again.stderr, again.stderr
    finally:
        assert cli("server", "stop").returncode == 0


def test_a_param_on_a_kubeflow_manifest_is_refused_by_name_and_stores_nothing(server, tmp_path):
    manifest = tmp_path / "pytorchjob.yaml"  # its args are fixed: Kubernetes substitutes nothing into them
    manifest.write_text("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: m}\nspec:\n"
                        "  pytorchReplicaSpecs:\n    Master:\n      replicas: 1\n      template:\n        spec:\n"
                        "          containers:\n            - name: pytorch\n              image: python:3.11\n"
                        "              command: [python, train.py]\n              args: [--epochs, '10']\n")
    r = server.cli("run", str(manifest), "-p", "epochs=1", "--follow")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{manifest} (with -p overrides) params.epochs: a Kubeflow PyTorchJob takes no params" in r.stderr
    assert json.loads(server.cli("ls", "-o", "json").stdout) == []
    assert server.cli("run", str(manifest), "--dry-run").returncode == 0  # without -p it is taken as before


def test_run_of_a_kubeflow_manifest_says_each_unused_field_once(server, tmp_path):
    manifest = tmp_path / "pytorchjob.yaml"
    manifest.write_text("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: m, namespace: ml}\nspec:\n"
                        "  pytorchReplicaSpecs:\n    Master:\n      replicas: 1\n      template:\n        spec:\n"
                        "          containers:\n            - name: pytorch\n"
                        f"              command: [{sys.executable}]\n              args: [-c, 'print(42)']\n")
    r = server.cli("run", str(manifest), "--wait")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(f"{manifest}:3 metadata.namespace") == 1, r.stderr  # read once, said once

def test_the_servers_refusal_of_a_spec_file_names_the_line_of_the_field(server, tmp_path):
    assert server.cli("queue", "create", "team-a").returncode == 0  # once a queue exists, an unknown one is refused
    spec = write_spec(tmp_path, "name: q\ncommand: 'true'\n\nqueue: nope\n")
    for wait in ([], ["--wait"]):  # --wait tries the quick way first, then says it as the full CLI does
        r = server.cli("run", str(spec), *wait)
        assert r.returncode == 2, r.stderr
        assert f"{spec}:4 queue: unknown queue 'nope'" in r.stderr, r.stderr
    secret = write_spec(tmp_path, "name: s\ncommand: 'true'\nsecrets:\n  X: none-such\n", "secret.yaml")
    assert f"{secret}:4 secrets.X: no secret 'none-such'" in server.cli("run", str(secret)).stderr
    flagged = server.cli("run", str(spec), "--queue", "nope-too")  # a flag's value: no line of the file says it
    assert "\n  queue: unknown queue 'nope-too'" in flagged.stderr, flagged.stderr
    assert json.loads(server.cli("ls", "-o", "json").stdout) == []

def test_a_capacity_refusal_of_a_spec_file_names_its_line_and_exits_as_the_files_errors_do(server, tmp_path):
    spec = write_spec(tmp_path, "name: q\ncommand: 'true'\nresources:\n  gpu: 9\n")  # the server's nodes: 4 GPUs
    for way in ([], ["--wait"], ["--follow"]):  # --wait and --follow try the quick way first
        r = server.cli("run", str(spec), *way)
        assert r.returncode == 2 and not r.stdout, (way, r.stderr)  # as an error of the file: nothing submitted
        assert f"\n  {spec}:4 resources.gpu: asks for 9 GPUs; the largest node has 4\n" in r.stderr, (way, r.stderr)
    flagged = server.cli("run", "--gpu", "9", "--", "true")  # a flag's value: no line of a file says it
    assert flagged.returncode == 2 and "\n  resources.gpu: asks for 9 GPUs" in flagged.stderr, flagged.stderr
    assert json.loads(server.cli("ls", "-o", "json").stdout) == []


GPUS_9 = "resources:\n{0}  gpu: 9\n"  # the server's nodes: 4 GPUs


def test_a_capacity_refusal_of_a_service_schedule_sweep_or_pipeline_file_names_its_line_as_run_does(server, tmp_path):
    # given files whose job (a service's, a schedule's or sweep's under job:, a pipeline's step) asks for 9 GPUs
    job = write_spec(tmp_path, "name: j\ncommand: 'true'\n" + GPUS_9.format(""))
    files = {
        ("service", "apply"): ("name: web\ncommand: app\nservice: {replicas: 1}\n" + GPUS_9.format(""), 5, ""),
        ("schedule", "create"): ("name: n\ncron: '0 0 1 1 *'\njob:\n  command: 'true'\n  " + GPUS_9.format("  "),
                                 6, "job."),
        ("sweep", "run"): ("name: s\nparameters: {lr: {values: [1]}}\nmetric: {name: acc}\njob:\n"
                           "  command: 'echo {{params.lr}}'\n  " + GPUS_9.format("  "), 7, "job."),
        ("pipeline", "run"): ("name: p\nsteps:\n  a:\n    command: 'true'\n    " + GPUS_9.format("    "), 6,
                              "steps.a."),
    }
    for (group, verb), (text, line, under) in files.items():
        path = write_spec(tmp_path, text, f"{group}.yaml")
        # when it is given to its command, then the refusal is at the file's line, as `run FILE`'s, exit 2
        r = server.cli(group, verb, str(path))
        assert r.returncode == 2 and not r.stdout, (group, r.stderr)
        said = f"\n  {path}:{line} {under}resources.gpu: asks for 9 GPUs; the largest node has 4\n"
        assert said in r.stderr, (group, r.stderr)
    # and a job file scheduled with --cron: its own line
    r = server.cli("schedule", "create", str(job), "--cron", "0 0 1 1 *")
    assert r.returncode == 2 and f"\n  {job}:4 resources.gpu: asks for 9 GPUs" in r.stderr, r.stderr
    # and nothing was made
    sdk = server.client()
    assert (sdk.services.list(include_ended=True), sdk.schedules.list(), sdk.sweeps.list()) == ([], [], [])
    assert sdk.pipelines.list().items == [] and json.loads(server.cli("ls", "-o", "json").stdout) == []

def test_an_empty_listing_says_so_on_stderr_and_a_filter_naming_no_queue_is_named(server):
    for args, said in ((["ls"], "no jobs"), (["ls", "-q", "nosuch", "-s", "failed"], "no jobs match --status failed "
                                             "--queue nosuch"),
                       (["queue", "ls"], "no queues defined"),
                       (["sweep", "ls", "--running"], "no sweeps match --running"),
                       (["pipeline", "ls"], "no pipeline runs"), (["schedule", "ls"], "no schedules"),
                       (["secret", "ls"], "no secrets"), (["service", "ls"], "no services (--all shows stopped"),
                       (["token", "ls"], "no tokens"), (["cluster", "ls", "-a"], "no clusters\n"),
                       (["notify", "ls"], "no subscriptions"), (["admin", "team", "ls"], "no teams")):
        r = server.cli(*args)
        assert r.returncode == 0 and r.stdout == "" and said in r.stderr, (args, r.stdout, r.stderr)
    for args, out in ((["ls", "-o", "json"], "[]\n"), (["ls", "--ids"], ""), (["sweep", "ls", "-o", "json"], "[]\n")):
        r = server.cli(*args)  # what scripts read: as it was, and nothing more said
        assert (r.returncode, r.stdout, r.stderr) == (0, out, ""), args
    assert server.cli("queue", "create", "team-a").returncode == 0
    for args in (["ls", "-q", "team-b"], ["ls", "-q", "team-b", "--ids"]):  # as `run --queue team-b` refuses it
        r = server.cli(*args)
        assert r.returncode == 0 and r.stdout == "", r.stderr
        assert "warning: unknown queue 'team-b'; did you mean 'team-a'? (defined: default, team-a)" in r.stderr
    assert "unknown queue" not in server.cli("ls", "-q", "default").stderr

def test_rm_deletes_an_ended_job_with_its_folders_and_files_and_refuses_a_running_one(server, tmp_path):
    write = "open(\"model.txt\", \"w\").write(\"m\")"
    spec = write_spec(tmp_path, f"name: made\ncommand: [{sys.executable}, -c, '{write}']\noutputs: ['*.txt']\n")
    r = server.cli("run", str(spec), "--wait")
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.strip()
    attempt = server.client().get(job_id).attempts[0].id
    folders = [server.home / "attempts" / attempt, server.home / "artifacts" / "jobs" / job_id]
    assert all(f.is_dir() for f in folders) and [a.path for a in server.client().outputs(job_id)] == ["model.txt"]
    sleepy_spec = write_spec(tmp_path, "name: sleepy\ncommand: sleep 30\n", "sleepy.yaml")
    sleepy = server.cli("run", str(sleepy_spec)).stdout.strip()
    # when both are removed in one call, as a script finds them
    assert server.cli("ls", "--ids", "--before", "1h").stdout == ""  # none submitted over an hour ago
    bad = server.cli("ls", "--before", "soon")
    assert bad.returncode == 2 and "--before: 'soon'" in bad.stderr, bad.stderr
    listed = server.cli("ls", "--ids", "--all", "--before", "2999-01-01").stdout.split()
    assert sorted(listed) == sorted([job_id, sleepy])
    r = server.cli("rm", *listed)
    # then the ended one is gone with its folders; the running one is refused, saying why, and runs on
    assert r.returncode == 1 and r.stdout.strip() == f"deleted {job_id}"
    assert f"job {sleepy} cannot be deleted: it is" in r.stderr and "cancel it first" in r.stderr
    assert "1 of 2 not deleted" in r.stderr
    assert not any(f.exists() for f in folders)
    assert server.cli("show", job_id).returncode == 1
    assert server.client().get(sleepy).status.value in ("starting", "running")
    again = server.cli("rm", job_id)
    assert again.returncode == 1 and f"no such job: {job_id}" in again.stderr
    assert server.cli("cancel", sleepy).returncode == 0


def test_cleanups_that_match_nothing_do_nothing_and_rm_reads_ids_from_stdin(server, tmp_path):
    # README's nightly cleanups: `trainyard rm $(trainyard ls -s failed --before 30d --ids --all)` and the like;
    # every command taking ids agrees (wait and label exited 2)
    assert server.cli("ls", "-s", "failed", "--ids", "--all").stdout == ""
    for args in (["rm"], ["cancel"], ["pipeline", "rm"], ["wait"], ["rm", "-"], ["cancel", "-"],
                 ["pipeline", "rm", "-"], ["wait", "-"], ["wait", "-", "--timeout", "5"], ["label", "-", "a=1"],
                 ["label", "-l", "nosuch=x", "a=1"]):
        r = server.cli(*args, stdin="")
        assert r.returncode == 0 and r.stdout == "" and "nothing to do" in r.stderr, (args, r.stderr)
    # naming no job at all is still a mistake of label's: it would change nothing it was asked to
    r = server.cli("label", "a=1")
    assert r.returncode == 2 and "no job" in r.stderr, r.stderr
    spec = write_spec(tmp_path, f"name: done\ncommand: [{sys.executable}, -c, 'pass']\n")
    job_id = server.cli("run", str(spec), "--wait").stdout.strip()
    r = server.cli("rm", "-", stdin=server.cli("ls", "--ids", "--all").stdout)
    assert r.returncode == 0 and r.stdout.strip() == f"deleted {job_id}", r.stderr
    r = server.cli("pipeline", "rm", "-", stdin="p-nosuchrun\n")
    assert r.returncode == 1 and "p-nosuchrun" in r.stderr, r.stderr


def test_a_job_is_named_by_its_name_too_the_newest_of_that_name(server):
    # given two jobs of one name (the second newer) and one of another
    c = server.client()
    first = c.submit({"name": "twice", "command": ["python", "-c", "print('one')"]})
    first.wait(timeout=120)
    second = c.submit({"name": "twice", "command": ["python", "-c", "print('two')"]})
    other = c.submit({"name": "only", "command": ["python", "-c", "print('only')"]})
    second.wait(timeout=120), other.wait(timeout=120)
    # when the read commands are given the name, they read the newest job of it, and say which
    logs = server.cli("logs", "twice")
    assert logs.returncode == 0 and logs.stdout == "two\n", logs.stderr
    assert logs.stderr == (f"twice: the newest job of that name, {second.id} "
                           "(`trainyard ls --name twice` lists them)\n")
    assert json.loads(server.cli("show", "-o", "json", "twice").stdout)["id"] == second.id
    assert f"{second.id}  (twice)" in server.cli("show", "twice").stdout
    events = [json.loads(server.cli("events", "-o", "json", ref).stdout) for ref in ("twice", second.id, first.id)]
    assert events[0] == events[1] != events[2]
    # a name of one job says nothing more, and rerun takes it
    only = server.cli("logs", "only")
    assert (only.returncode, only.stdout, only.stderr) == (0, "only\n", "")
    again = server.cli("rerun", "only", "--wait")
    assert again.returncode == 0 and c.get(again.stdout.split()[0]).spec.name == "only", again.stderr
    # an id is an id, and what names nothing says so
    assert server.cli("logs", first.id).stdout == "one\n"
    missing = server.cli("logs", "nosuch")
    assert missing.returncode == 1 and "no such job: nosuch (neither a job id nor the name" in missing.stderr
