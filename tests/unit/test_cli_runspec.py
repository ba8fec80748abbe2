"""What `trainyard run` builds from a target and flags, and that --dry-run's YAML reads back the same."""

import pytest

from trainyard.cli.runspec import Flags, build, to_yaml
from trainyard.errors import InvalidSpec
from trainyard.spec.loader import parse_job


def test_a_command_after_double_dash_runs_in_the_current_folder(tmp_path):
    sub = build(["python", "train.py", "--lr", "0.1"], Flags(gpu=1, gpu_type=["A100", "H100"], pip=["numpy"]), tmp_path)
    assert sub.spec.command == ["python", "train.py", "--lr", "0.1"] and sub.spec.name == "train"
    assert sub.spec.workdir == "." and sub.base_dir == tmp_path and sub.path is None
    assert sub.spec.resources.gpu_types == ["A100", "H100"] and sub.spec.env.pip == ["numpy"]


def test_a_script_runs_with_python_and_its_arguments(tmp_path):
    (tmp_path / "fit.py").write_text("")
    sub = build([str(tmp_path / "fit.py"), "--x", "1"], Flags(), tmp_path)
    assert sub.spec.command == ["python", "fit.py", "--x", "1"] and sub.spec.name == "fit"


def test_flags_lay_over_a_spec_file_and_a_file_without_flags_goes_as_it_is(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\ncommand: echo\nenv_vars: {A: '1'}\nresources: {cpu: 2}\n")
    assert build([str(spec)], Flags(), tmp_path).path == spec
    sub = build([str(spec)], Flags(memory="1Gi", env_vars={"B": "2"}, queue="q1", secrets={"K": "k"}), tmp_path)
    assert sub.path is None and sub.spec.resources.cpu == 2 and sub.spec.resources.memory == 2**30
    assert sub.spec.env_vars == {"A": "1", "B": "2"} and sub.spec.queue == "q1" and sub.spec.secrets == {"K": "k"}


def test_requirements_are_written_relative_to_the_spec_folder(tmp_path):
    (tmp_path / "reqs").mkdir()
    (tmp_path / "reqs" / "r.txt").write_text("numpy\n")
    sub = build(["python", "x.py"], Flags(requirements="reqs/r.txt"), tmp_path)
    assert sub.spec.env.requirements == "reqs/r.txt"


def test_the_dry_run_yaml_reads_back_as_the_same_spec(tmp_path):
    flags = Flags(params={"lr": 0.1}, cpu="500m", memory="1536Mi", gpu=1, env_vars={"X": "y z"}, timeout="2h",
                  retries=2, priority="high", node_selector={"zone": "a"}, secrets={"HF_TOKEN": "hf-read"})
    spec = build(["python", "t.py", "{{params.lr}}"], flags, tmp_path).spec
    text = to_yaml(spec)
    assert "memory: 1.5Gi" in text and "retry: {max: 2}" in text
    assert parse_job(text) == spec


def test_a_bad_flag_value_names_the_flag(tmp_path):
    with pytest.raises(InvalidSpec) as e:
        build(["true"], Flags(memory="3x"), tmp_path)
    assert e.value.errors[0]["where"] == "command line --memory (resources.memory)"
    with pytest.raises(InvalidSpec) as e:
        build(["true"], Flags(secrets={"PATH": "p"}), tmp_path)
    assert e.value.errors[0]["where"] == "command line --secret (secrets)"


def test_an_integer_priority_flag_is_the_integer_and_a_class_name_its_value(tmp_path):
    # the old code refused --priority 150 as an unknown priority class, though its help says "or an integer"
    assert build(["true"], Flags(priority="150"), tmp_path).spec.priority == 150
    assert build(["true"], Flags(priority="-5"), tmp_path).spec.priority == -5
    assert build(["true"], Flags(priority="high"), tmp_path).spec.priority == 200
    with pytest.raises(InvalidSpec) as e:
        build(["true"], Flags(priority="1e3"), tmp_path)
    assert e.value.errors[0]["where"] == "command line --priority (priority)"


def test_no_target_says_how_to_give_one(tmp_path):
    with pytest.raises(InvalidSpec) as e:
        build([], Flags(), tmp_path)
    assert "trainyard run -- python train.py" in e.value.errors[0]["message"]


def test_a_missing_script_or_spec_names_the_file_it_may_have_meant(tmp_path):
    (tmp_path / "train.py").write_text("")
    with pytest.raises(InvalidSpec) as e:
        build([str(tmp_path / "trian.py")], Flags(), tmp_path)
    assert e.value.errors[0]["message"] == "no such file; did you mean 'train.py'?"


def test_a_spec_file_takes_no_command_arguments(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("command: echo\n")
    with pytest.raises(InvalidSpec) as e:
        build([str(spec), "--lr", "1"], Flags(), tmp_path)
    assert "takes no arguments" in e.value.errors[0]["message"] and "-p k=v" in e.value.errors[0]["message"]


def test_a_param_the_spec_does_not_declare_is_named_but_still_passed(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\ncommand: python t.py --lr {{params.lr}}\nparams: {lr: 0.1, seed: 1}\n")
    sub = build([str(spec)], Flags(params={"lrr": 0.5, "lr": 0.2, "tag": "x"}), tmp_path)
    assert sub.undeclared == ["lrr", "tag"] and sub.spec.params["lrr"] == 0.5 and sub.spec.params["lr"] == 0.2
    with_flags = build([str(spec)], Flags(params={"lrr": 0.5, "seed": 2}, cpu="1"), tmp_path)
    assert with_flags.undeclared == ["lrr"] and with_flags.path is None
    assert build([str(spec)], Flags(params={"seed": 2}), tmp_path).undeclared == []
    bare = tmp_path / "bare.yaml"
    bare.write_text("name: j\ncommand: python t.py\n")  # no params at all: every -p is undeclared
    assert build([str(bare)], Flags(params={"seed": 2}), tmp_path).undeclared == ["seed"]


def test_run_warns_of_an_undeclared_param_on_stderr_and_keeps_the_spec_on_stdout(tmp_path):
    import os
    import subprocess
    import sys

    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\ncommand: python t.py --lr {{params.lr}}\nparams: {lr: 0.1, epochs: 3}\n")
    env = {**os.environ, "TRAINYARD_HOME": str(tmp_path / "home")}
    run = [sys.executable, "-m", "trainyard", "run", str(spec), "--dry-run"]
    out = subprocess.run([*run, "-p", "lrr=0.5"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and parse_job(out.stdout).params["lrr"] == 0.5
    assert "declares no param lrr (its params: lr, epochs), so its command cannot use it" in out.stderr
    assert "trainyard.params()" in out.stderr
    quiet = subprocess.run([*run, "-p", "lr=0.5"], capture_output=True, text=True, env=env, timeout=60)
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_a_missing_file_or_a_bad_flag_is_said_as_it_is_and_a_bad_spec_is_headed_invalid_spec(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from trainyard.cli.main import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("command: x\nfoo: 1\n")
    for argv, said in ([["run", "nothere.yaml"], "error: nothere.yaml: no such file\n"],
                       [["run", "-e", "X", "--", "true"], "error: --env: 'X': expected KEY=VALUE\n"],
                       [["run", "bad.yaml"], "error: invalid spec\n  bad.yaml:2 foo: unknown field 'foo'\n"]):
        got = CliRunner().invoke(app, argv)
        assert got.exit_code == 2 and got.output == said, (argv, got.output)
