import shlex
import subprocess

import pytest
from pydantic import ValidationError

from trainyard.errors import InvalidSpec
from trainyard.spec import load_job, parse_job, parse_param_overrides
from trainyard.spec.job import JobSpec
from trainyard.spec.queue import load_queues
from trainyard.spec.records import JobInfo
from trainyard.spec.submitted import STORED


def errors_of(text: str) -> list[dict]:
    with pytest.raises(InvalidSpec) as exc:
        parse_job(text, "job.yaml")
    return exc.value.errors


def test_a_full_spec_parses_with_units_and_defaults():
    spec = parse_job(
        "name: train\n"
        "command: python train.py --lr {{params.lr}}\n"
        "params: {lr: 0.1}\n"
        "resources: {cpu: 500m, memory: 4Gi, gpu: 2, gpu_type: A100}\n"
        "timeout: 2h\n"
        "priority: high\n"
        "retry: {max: 3, backoff: 30s}\n"
    )
    assert spec.resources.cpu == 0.5
    assert spec.resources.memory == 4 * 2**30
    assert spec.resources.gpu_types == ["A100"]
    assert spec.timeout == 7200
    assert spec.priority == 200
    assert spec.retry.backoff == 30
    assert spec.argv()[-1] == "python train.py --lr 0.1"


def test_unknown_field_is_named_with_its_line():
    errs = errors_of("command: x\nresources:\n  cpu: 1\n  gpus: 2\n")
    assert errs == [{"field": "resources.gpus", "line": 4, "message": "unknown field 'gpus'; did you mean 'gpu'?",
                     "where": "job.yaml:4 resources.gpus"}]


def test_bad_units_and_negative_resources_are_named():
    errs = errors_of("command: x\nresources:\n  memory: 4Gx\n  gpu: -1\n  cpu: -2\n")
    by_field = {e["field"]: e for e in errs}
    assert "unknown unit 'Gx'" in by_field["resources.memory"]["message"]
    assert by_field["resources.memory"]["line"] == 3
    assert by_field["resources.gpu"]["line"] == 4
    assert "negative" in by_field["resources.cpu"]["message"]


def test_missing_command_and_bad_yaml():
    assert errors_of("name: x\n")[0]["field"] == "command"
    bad = errors_of("command: [unclosed\n")
    assert bad[0]["message"].startswith("not valid YAML") and bad[0]["line"] is not None


def test_params_used_by_the_command_must_exist():
    errs = errors_of("command: python t.py --lr {{params.lr}}\n")
    assert "params not given: lr" in errs[0]["message"]


def test_overrides_are_typed_and_revalidated(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text("command: [echo, '{{params.n}}', '{{params.flag}}']\nparams: {n: 1, flag: false}\n")
    spec = load_job(f, parse_param_overrides(["n=5", "flag=true"]))
    assert spec.params == {"n": 5, "flag": True}
    assert spec.argv() == ["echo", "5", "true"]
    with pytest.raises(InvalidSpec):
        parse_param_overrides(["novalue"])


def test_replicas_need_a_distributed_kind():
    assert "distributed" in errors_of("command: x\nreplicas: 2\n")[0]["message"]
    assert parse_job("command: x\nreplicas: 2\ndistributed: torch\n").replicas == 2


def test_a_param_is_one_word_of_a_string_command_and_one_element_of_a_list(tmp_path):
    # given a value that would be a second shell command if it were pasted in as text
    hostile = f"a; touch {tmp_path / 'PWNED'}"
    f = tmp_path / "job.yaml"
    f.write_text("command: echo {{params.x}}\nparams: {x: ''}\n")
    # when it comes in with -p and the job's command runs
    spec = load_job(f, parse_param_overrides([f"x={hostile}"]))
    done = subprocess.run(spec.argv(), capture_output=True, text=True, check=True)
    # then the shell saw one word: echo printed it, and nothing else ran
    assert done.stdout == hostile + "\n" and not (tmp_path / "PWNED").exists()
    assert spec.argv()[-1] == f"echo {shlex.quote(hostile)}"
    assert parse_job("command: python t.py --lr {{params.lr}}\nparams: {lr: 0.1}\n").argv()[-1] == \
        "python t.py --lr 0.1"  # a plain value needs no quotes and gets none
    # a list command is argv already: the value is one element, as it is
    listed = parse_job("command: [echo, 'v={{params.x}}']\nparams: {x: 'a b; c'}\n")
    assert listed.argv() == ["echo", "v=a b; c"]


@pytest.mark.parametrize("text, field, line", [
    ("resources: {cpu: nan}\n", "resources.cpu", 2),
    ("resources:\n  cpu: .inf\n", "resources.cpu", 3),
    ("resources: {cpu: 10000000}\n", "resources.cpu", 2),
    ("resources: {memory: 99999999999999999999Gi}\n", "resources.memory", 2),
    ("resources: {memory: [1]}\n", "resources.memory", 2),
    ("resources: {memory: {a: 1}}\n", "resources.memory", 2),
    ("resources: {gpu: 10000000}\n", "resources.gpu", 2),
    ("priority: 100000000000000000000000\n", "priority", 2),
    ("priority: -4000000000\n", "priority", 2),
    ("timeout: .nan\n", "timeout", 2),
    ("timeout: 99999d\n", "timeout", 2),
    ("grace_period: .inf\n", "grace_period", 2),
    ("retry: {backoff: .inf}\n", "retry.backoff", 2),
    ("retry: {max: 1000000}\n", "retry.max", 2),
    ("retry: {permanent_exit_codes: [1, 99999999999]}\n", "retry.permanent_exit_codes.1", 2),
    ("replicas: 100000\ndistributed: torch\n", "replicas", 2),
    ("params: {x: {y: [.nan]}}\n", "params", 2),
])
def test_every_number_is_finite_and_in_range_or_its_field_is_named(text, field, line):
    errs = errors_of("command: x\n" + text)
    assert [(e["field"], e["line"]) for e in errs] == [(field, line)], errs


def test_a_name_with_a_trailing_newline_is_refused():
    # "^...$" with re.match let "abc\n" through into paths and labels
    assert [(e["field"], e["line"]) for e in errors_of('name: "abc\\n"\ncommand: x\n')] == [("name", 1)]


def test_a_nul_anywhere_in_a_spec_is_named_with_its_line():
    # execve stops at a NUL: such a job used to fail at start, as LostContact
    errs = errors_of('command:\n  - echo\n  - "a\\0b"\nparams: {x: {y: ["\\0"]}}\n')
    assert [(e["field"], e["line"]) for e in errs] == [("command.1", 3)], errs
    assert "NUL character" in errs[0]["message"]
    assert [(e["field"], e["line"]) for e in errors_of('command: x\nparams: {x: {y: ["\\0"]}}\n')] == [
        ("params.x.y.0", 2)]


@pytest.mark.parametrize("key", ["int", "str", "float", "list"])
def test_a_top_level_key_spelled_like_a_type_is_an_unknown_field(key):
    # pydantic names union branches "str", "int"…: a key spelled so must not be taken for one
    assert errors_of(f"command: x\n{key}: 1\n") == [
        {"field": key, "line": 2, "message": f"unknown field {key!r}", "where": f"job.yaml:2 {key}"}]


def test_queue_numbers_are_bounded_and_named(tmp_path):
    f = tmp_path / "queues.yaml"
    f.write_text("queues:\n- name: a\n  priority: -40000000000000000000\n- name: b\n  quota:\n    memory: [1]\n"
                 "    cpu: .nan\n    gpu: {A100: 99999999}\n    jobs: 99999999999\n")
    with pytest.raises(InvalidSpec) as exc:
        load_queues(f)
    assert sorted((e["field"], e["line"]) for e in exc.value.errors) == [
        ("queues.0.priority", 3), ("queues.1.quota.cpu", 7), ("queues.1.quota.gpu.A100", 8),
        ("queues.1.quota.jobs", 9), ("queues.1.quota.memory", 6)]


@pytest.mark.parametrize("url, said", [
    ("local:///etc/shadow", "local:// is not taken"),
    ("simplecache::file:///etc/shadow", "a chain of URLs"),
    ("zip://a.txt::file:///root/x.zip", "a chain of URLs"),
    ("tar:///x", "tar:// is not taken"),
    ("/data/x\nrm", "printable characters"),
])
def test_an_input_url_that_would_make_the_launcher_read_a_local_file_is_refused(url, said):
    [e] = errors_of(f"command: x\ninputs:\n  data: {url!r}\n".replace("'", '"'))
    assert (e["field"], e["line"]) == ("inputs.data", 3) and said in e["message"], e


def test_paths_file_urls_and_remote_stores_are_taken_as_inputs():
    urls = {"a": "/data/x", "b": "rel/x", "c": "file:///data/x", "d": "s3://b/k", "e": "https://h/x.csv",
            "f": "gs://b/k", "g": "hf://datasets/x", "h": "job://j-1/model"}
    assert parse_job("command: x\ninputs: " + repr(urls).replace("'", '"') + "\n").inputs == urls


def test_yaml_is_read_as_json_holds_it_or_refused_at_its_line():
    # a date is the text as written; JSON, where a spec is stored, has no dates
    spec = parse_job("name: 2024-01-01\ncommand: echo {{params.d}}\nparams: {d: 2024-01-01 10:00:00}\n")
    assert spec.name == "2024-01-01" and spec.params == {"d": "2024-01-01 10:00:00"}
    for text, field, line in [("command: !!binary aGVsbG8=\n", "command", 1), ("command: x\n? [a, b]\n: 1\n", "", 2),
                              ("command: x\nparams:\n  ? {a: 1}\n  : 1\n", "params", 3),
                              ("command: !!python/name:os.system x\n", "command", 1)]:
        assert [(e["field"], e["line"]) for e in errors_of(text)] == [(field, line)], text



def test_retry_on_and_other_yaml_1_1_boolean_words_are_keys_as_written():
    # `on:` is True in YAML 1.1 (PyYAML), a key no spec can hold: the README's own retry line was refused
    spec = parse_job("command: x\nretry: {max: 2, backoff: 10s, on: [error, oom]}\nenv_vars: {yes: 1, Off: 2}\n")
    assert spec.retry.on == ["error", "oom"] and spec.env_vars == {"yes": "1", "Off": "2"}
    assert parse_job("command: x\nretry:\n  max: 1\n  on: [timeout]\n").retry.on == ["timeout"]
    assert [(e["field"], e["line"]) for e in errors_of("command: x\nretry:\n  on: [oom]\n  ON: [error]\n")] == \
        [("retry.ON", 4)]  # a key not known, named as written
    assert parse_job("command: x\nparams: {flag: on}\n").params == {"flag": True}  # values keep YAML's reading

@pytest.mark.parametrize("text, field, line", [
    ("image: --privileged\n", "image", 2),
    ("image: 'x; rm -rf /'\n", "image", 2),
    ("image: python:3.11\nworker_image: 'a b'\n", "worker_image", 3),
    ("outputs: [model/*.pt, /etc/passwd]\n", "outputs.1", 2),
    ("outputs:\n  - ../../secrets/*\n", "outputs.0", 3),
    ("resources: {gpu: 1, gpu_type: " + "A" * 64 + "}\n", "resources.gpu_type", 2),
    ("resources: {gpu: 1, gpu_type: [A100, 'H100; x']}\n", "resources.gpu_type", 2),
    ("env_vars:\n  A: .nan\n", "env_vars.A", 3),
    ("env_vars: {A: x, B: [1]}\n", "env_vars.B", 2),
    ("env: {pip: [numpy, -r/etc/shadow]}\n", "env.pip.1", 2),
    ("env: {pip: ['--index-url=https://evil.example/simple']}\n", "env.pip.0", 2),
    ("env: {pip: ['numpy --extra-index-url https://evil.example']}\n", "env.pip.0", 2),
    ("env: {pip: [-e /etc]}\n", "env.pip.0", 2),
    ("env: {pip: [/etc]}\n", "env.pip.0", 2),
    ("env: {pip: [./pkg/../../x]}\n", "env.pip.0", 2),
])
def test_strings_that_reach_a_command_line_or_a_path_are_checked_at_submit(text, field, line):
    assert [(e["field"], e["line"]) for e in errors_of("command: x\n" + text)] == [(field, line)]


def test_what_jobs_legitimately_say_still_passes_and_a_stored_spec_loads_as_it_was():
    spec = parse_job("command: x\nimage: localhost/trainyard-test/busybox-m:0f1e\nworker_image: reg:5000/a/b_c:1.2"
                     "@sha256:" + "a" * 64 + "\noutputs: [model/*.pt, '**/*.json']\n"
                     "resources: {gpu: 1, gpu_type: [A100, H100, RTX4090, RTX-4090, T4, Tesla-V100-SXM2-16GB]}\n"
                     "env_vars: {A: 1, B: true, C: 0.5, D: ''}\n"
                     "env: {pip: ['torch==2.3.0', 'numpy>=1.26', 'pkg[extra]', 'pkg @ https://x.example/p.whl',"
                     " './tinypkg', 'git+https://github.com/a/b', 'x; python_version >= \"3.8\"']}\n")
    assert spec.env_vars == {"A": "1", "B": "true", "C": "0.5", "D": ""} and len(spec.env.pip) == 7
    # a spec stored before these checks still reads back (a listing or the scheduler must not fail on it)
    old = {"command": "x", "image": "--privileged", "outputs": ["/abs"], "env": {"pip": ["-r/x"]},
           "resources": {"gpu_type": "a b"}, "inputs": {"a": "simplecache::file:///x"}}
    with pytest.raises(ValidationError):
        JobSpec.model_validate(old)
    assert JobSpec.model_validate(old, context=STORED).image == "--privileged"
    assert JobInfo.model_validate({"id": "j-1", "name": "job", "status": "failed", "queue": "default", "priority": 0,
                                   "spec": old, "created_at": 0, "updated_at": 0}).spec.outputs == ["/abs"]


def test_a_grace_period_is_at_most_an_hour_and_one_stored_before_the_bound_still_loads():
    assert parse_job("command: x\ngrace_period: 1h").grace_period == 3600
    assert [(e["field"], e["line"]) for e in errors_of("command: x\ngrace_period: 30d")] == [("grace_period", 2)]
    assert JobSpec.model_validate({"command": "x", "grace_period": 86400}, context=STORED).grace_period == 86400


def test_a_pipeline_step_or_sweep_stored_before_the_grace_bound_still_starts_its_jobs():
    from trainyard.services.pipeline_io import cache_key
    from trainyard.spec.sweep import SweepSpec

    # a run's step and a sweep read back run on (the launcher caps the grace at 1h); they failed "at most 3600"
    assert cache_key({"command": "x", "grace_period": 7200}, None, {}, []).startswith("sha256:")
    sweep = SweepSpec.model_validate({"name": "s", "job": {"command": "x", "grace_period": 7200}, "metric": {
        "name": "m"}, "parameters": {"k": {"values": [1]}}}, context=STORED)
    assert sweep.trial_job(1, {"k": 1}, "w-1", stored=True).grace_period == 7200
    with pytest.raises(ValueError):  # a new sweep's first trial is checked as any submit
        sweep.trial_job(0, {"k": 1})


def test_errors_found_after_reading_are_put_at_their_fields_line():
    from trainyard.spec.lines import placed

    text = "name: q\ncommand: 'true'\n\nqueue: nope\nsecrets:\n  - A\nresources: {cpu: 1}\n"
    server = [{"field": "queue", "line": None, "message": "unknown queue 'nope'", "where": "queue"},
              {"field": "secrets.A", "line": None, "message": "no secret 'A'", "where": "secrets.A"},
              {"field": "resources.gpu", "line": None, "message": "too many", "where": "resources.gpu"},
              {"field": "priority", "line": None, "message": "not written", "where": "priority"},
              {"field": "", "line": None, "message": "whole", "where": "job.yaml"}]
    out = placed(server, text, "job.yaml")
    assert [e["where"] for e in out] == ["job.yaml:4 queue", "job.yaml:5 secrets.A", "job.yaml:7 resources.gpu",
                                         "priority", "job.yaml"]  # the nearest key above; none written: as it was
    assert out[0]["line"] == 4 and out[0]["message"] == "unknown queue 'nope'"
    assert placed(server, "a: [", "job.yaml") == server  # text that does not read: as they were


def test_the_readmes_nightly_schedule_is_the_example_file_and_reads_as_a_schedule(tmp_path):
    import re
    from pathlib import Path

    from trainyard.spec.loader import read_model
    from trainyard.spec.schedule import ScheduleSpec

    root = Path(__file__).resolve().parents[2]
    shown = re.search(r"```yaml\n# examples/digits/nightly\.yaml\n(.*?)```", (root / "README.md").read_text(), re.S)
    example = root / "examples/digits/nightly.yaml"
    assert shown is not None and shown[1] == example.read_text()  # headed by the file's name: the file, as it is
    (tmp_path / "nightly.yaml").write_text(shown[1])
    spec = read_model(ScheduleSpec, tmp_path / "nightly.yaml")
    assert spec.name == "digits-nightly" and spec.job.params["epochs"] == 30
