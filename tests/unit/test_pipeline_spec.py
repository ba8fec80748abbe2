"""The pipeline spec: foreach expansion, references, needs, cycles, and errors that name the line."""

import pytest

from trainyard.errors import InvalidSpec
from trainyard.launch.named import missing_outputs, substitute
from trainyard.spec.job import JobSpec
from trainyard.pipelines.expansion import Expansion
from trainyard.spec.pipeline import MAX_RUN_TEXT, MAX_STEP_JOBS, parse_pipeline
from trainyard.spec.pipeline_file import load_pipeline
from trainyard.spec.pipeline_graph import build

GOOD = """\
name: imdb
params: {workers: 3, epochs: 2, langs: [en, fr]}
steps:
  copier:
    command: python copier.py --workers {{params.workers}} --out {{outputs.shards}}
    outputs: [shards]
  train:
    foreach: "{{params.workers}}"
    inputs: {shard: "{{steps.copier.outputs.shards}}/{{item}}"}
    command: [python, trainer.py, --data, "{{inputs.shard}}", --epochs, "{{params.epochs}}", --out, "{{outputs.model}}"]
    outputs: [model]
  aggregate:
    inputs: {models: "{{steps.train.outputs.model}}"}
    command: python aggregator.py --models {{inputs.models}} --out {{outputs.model}}
    outputs: [model]
  report:
    foreach: "{{params.langs}}"
    needs: [aggregate]
    cache: false
    command: python report.py --lang {{item}} --n {{index}} --model {{steps.aggregate.outputs.model}}
"""


def write(tmp_path, text):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


def errors_of(tmp_path, text, params=None):
    with pytest.raises(InvalidSpec) as exc:
        load_pipeline(write(tmp_path, text), params)
    return exc.value.errors


def graph(tmp_path, text, params=None):
    loaded = load_pipeline(write(tmp_path, text), params)
    return {i.name: i for i in build(loaded.spec, loaded.params).instances}


def test_foreach_fans_out_from_a_param_and_a_fan_in_gets_every_item(tmp_path):
    g = graph(tmp_path, GOOD, {"workers": 4})
    assert list(g) == ["copier", *(f"train-{i}" for i in range(4)), "aggregate", "report-0", "report-1"]
    t2 = g["train-2"]
    assert t2.needs == ["copier"] and t2.index == 2 and t2.job["name"] == "train-2"
    assert t2.inputs["shard"] == {"kind": "step", "step": "copier", "output": "shards", "subpath": "/2",
                                  "from": ["copier"], "fan_in": False}
    assert t2.job["params"] == {"epochs": 2}  # only the params it uses: a change elsewhere keeps its cache
    agg = g["aggregate"]
    assert agg.needs == [f"train-{i}" for i in range(4)]
    assert agg.inputs["models"]["fan_in"] and agg.inputs["models"]["from"] == [f"train-{i}" for i in range(4)]
    assert g["copier"].job["params"] == {"workers": 4}


def test_items_from_a_list_param_and_a_reference_in_the_command_becomes_an_input(tmp_path):
    g = graph(tmp_path, GOOD)
    r1 = g["report-1"]
    assert r1.job["command"] == "python report.py --lang fr --n 1 --model {{inputs.step_aggregate_model}}"
    assert r1.inputs["step_aggregate_model"]["from"] == ["aggregate"] and r1.needs == ["aggregate"]
    assert r1.cache is False and r1.job["env_vars"]["TRAINYARD_ITEM"] == "fr"
    assert g["aggregate"].job["env_vars"]["TRAINYARD_OUTPUT_NAMES"] == "model"


def test_a_cycle_is_named_with_its_steps_and_line(tmp_path):
    errs = errors_of(tmp_path, "steps:\n  a:\n    command: x\n    needs: [c]\n  b:\n    command: y\n    needs: [a]\n"
                               "  c:\n    command: z\n    inputs: {m: '{{steps.b.outputs.m}}'}\n")
    # b has no output m, reported first; fix that and the cycle is what is left
    assert errs[0]["field"] == "steps.c.inputs.m" and errs[0]["line"] == 10
    errs = errors_of(tmp_path, "steps:\n  a:\n    command: x\n    needs: [c]\n  b:\n    command: y\n    needs: [a]\n"
                               "  c:\n    command: z\n    needs: [b]\n")
    assert len(errs) == 1 and "cycle:" in errs[0]["message"]
    assert set(errs[0]["message"].removeprefix("cycle: ").split(" → ")) == {"a", "b", "c"}
    assert errs[0]["where"].startswith(f"{tmp_path / 'p.yaml'}:")


def test_a_step_waits_for_steps_not_for_jobs(tmp_path):
    errs = errors_of(tmp_path, "steps:\n  a:\n    command: x\n  b:\n    command: y\n    after: [j-0123456789]\n")
    assert [(e["field"], e["line"]) for e in errs] == [("steps.b.after", 6)]
    assert "needs:" in errs[0]["message"]


def test_unknown_steps_outputs_and_params_are_named_with_the_line(tmp_path):
    errs = errors_of(tmp_path, """\
steps:
  a:
    command: x {{params.nope}}
    outputs: [m]
  b:
    needs: [ghost]
    command: y {{inputs.data}} {{item}}
    inputs:
      w: "{{steps.a.outputs.w}}"
      z: "{{steps.zz.outputs.m}}"
""")
    by_field = {e["field"]: e for e in errs}
    # at the command's line, with the params there are (the job's own check said 'steps.a', at the step's)
    assert (by_field["steps.a.command"]["line"], by_field["steps.a.command"]["message"]) == (
        3, "unknown param 'nope' (declared: none)")
    assert "steps.a" not in by_field
    assert (by_field["steps.b.needs"]["line"], by_field["steps.b.needs"]["message"]) == (6, "unknown step 'ghost'")
    assert by_field["steps.b.inputs.w"]["line"] == 9
    assert by_field["steps.b.inputs.w"]["message"] == "step 'a' has no output 'w' (it has: m)"
    assert "unknown step 'zz'" in by_field["steps.b.inputs.z"]["message"]
    assert "the step declares no input 'data'" in by_field["steps.b.command"]["message"]
    assert any("only set in a foreach step" in e["message"] for e in errs)


def test_a_misspelt_step_or_param_is_named_with_the_one_meant(tmp_path):
    errs = errors_of(tmp_path, """\
params: {epochs: 2}
steps:
  split:
    command: x {{outputs.shards}}
    outputs: [shards]
  train:
    needs: [splt]
    inputs: {shard: "{{steps.spilt.outputs.shards}}"}
    command: y {{inputs.shard}} --epochs {{params.epoch}}
""")
    said = {e["field"]: (e["line"], e["message"]) for e in errs}
    assert said == {
        "steps.train.needs": (7, "unknown step 'splt'; did you mean 'split'?"),
        "steps.train.inputs.shard": (8, "unknown step 'spilt' in {{steps.spilt.outputs.shards}}; "
                                        "did you mean 'split'?"),
        "steps.train.command": (9, "unknown param 'epoch' (declared: epochs); did you mean 'epochs'?"),
    }


def test_job_fields_of_a_step_are_checked_with_their_line(tmp_path):
    errs = errors_of(tmp_path, "steps:\n  a:\n    command: x\n    resources:\n      memory: 4Qi\n    bogus: 1\n")
    by_field = {e["field"]: e for e in errs}
    assert by_field["steps.a.resources.memory"]["line"] == 5
    assert by_field["steps.a.bogus"]["message"] == "unknown field 'bogus'"


def test_bad_foreach_names_and_overrides(tmp_path):
    text = "params: {n: 0, s: abc}\nsteps:\n  a:\n    foreach: '{{params.n}}'\n    command: x\n"
    assert "no items" in errors_of(tmp_path, text)[0]["message"]
    errs = errors_of(tmp_path, text.replace("params.n", "params.s"))
    assert errs[0]["field"] == "steps.a.foreach" and "not a number or a list" in errs[0]["message"]
    errs = errors_of(tmp_path, GOOD, {"wokers": 5})
    assert errs[0]["field"] == "params.wokers" and "unknown param" in errs[0]["message"]
    assert errs[0]["message"].endswith("; did you mean 'workers'?")
    errs = errors_of(tmp_path, "steps:\n  Bad_Name:\n    command: x\n")
    assert errs[0]["field"] == "steps" and "step name 'Bad_Name'" in errs[0]["message"]


def test_a_dict_pipeline_without_lines_still_names_fields():
    spec = parse_pipeline({"steps": {"a": {"command": "x", "needs": ["a"]}}})
    with pytest.raises(InvalidSpec) as exc:
        build(spec, {})
    assert exc.value.errors[0]["field"] == "steps.a.needs" and "cannot need itself" in exc.value.errors[0]["message"]


def test_the_launcher_substitutes_named_inputs_and_outputs_and_finds_missing_ones(tmp_path):
    out = tmp_path / "out dir"
    argv = substitute(["bash", "-c", "cat {{inputs.data}} > {{outputs.model}}"], {"data": "/d/x"}, out)
    assert argv[2] == f"cat /d/x > '{out}/model'"
    assert substitute(["python", "t.py", "{{outputs.m}}", "{{inputs.other}}"], {}, out) == \
        ["python", "t.py", str(out / "m"), "{{inputs.other}}"]
    out.mkdir()
    (out / "model").write_text("w")
    assert missing_outputs({"TRAINYARD_OUTPUT_NAMES": "model,metrics"}, out) == ["metrics"]


def test_a_step_can_be_a_job_spec_file_with_its_own_keys_on_top(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.yaml").write_text("name: t\ncommand: python train.py\nresources: {cpu: 2}\n"
                                                  "env_vars: {A: '1'}\n")
    g = graph(tmp_path, "steps:\n  train:\n    job: jobs/train.yaml\n    env_vars: {B: '2'}\n")
    job = g["train"].job
    assert job["command"] == "python train.py" and job["resources"] == {"cpu": 2}
    assert job["workdir"] == "jobs" and job["env_vars"]["B"] == "2" and "A" not in job["env_vars"]
    errs = errors_of(tmp_path, "steps:\n  train:\n    job: nope.yaml\n")
    assert errs[0]["field"] == "steps.train.job" and errs[0]["line"] == 3 and "cannot read" in errs[0]["message"]


def test_params_and_items_are_one_shell_word_in_a_string_command_of_a_step(tmp_path):
    text = ("params: {msg: hi, langs: [en]}\nsteps:\n  a:\n    foreach: '{{params.langs}}'\n"
            "    command: echo {{params.msg}} {{item}}\n  b:\n    command: [echo, '{{params.msg}}']\n")
    g = graph(tmp_path, text, {"msg": "x; rm -rf ~", "langs": ["en fr; reboot"]})
    job = JobSpec.model_validate(g["a-0"].job)
    assert job.argv()[-1] == "echo 'x; rm -rf ~' 'en fr; reboot'"
    assert JobSpec.model_validate(g["b"].job).argv() == ["echo", "x; rm -rf ~"]


def test_fan_out_and_param_values_are_bounded_and_named(tmp_path):
    errs = errors_of(tmp_path, "params: {n: 2}\nsteps:\n  a:\n    foreach: 10001\n    command: x\n"
                               "  b:\n    foreach: '{{params.n}}'\n    command: y\n", {"n": 20_000})
    assert sorted((e["field"], e["line"]) for e in errs) == [("steps.a.foreach", 4), ("steps.b.foreach", 7)]
    assert "more than 10000 items" in errs[0]["message"]
    errs = errors_of(tmp_path, "steps:\n  a:\n    command: x\n    priority: 1000000000000\n")
    assert [(e["field"], e["line"]) for e in errs] == [("steps.a.priority", 4)]
    assert errors_of(tmp_path, "params: {x: .nan}\nsteps:\n  a:\n    command: x\n")[0]["field"] == "params"
    overridden = errors_of(tmp_path, "params: {x: 1}\nsteps:\n  a:\n    command: x\n", {"x": float("inf")})
    assert overridden[0]["field"] == "params" and "inf" in overridden[0]["message"]
    top = errors_of(tmp_path, "int: 1\nsteps:\n  a:\n    command: x\n")
    assert [(e["field"], e["line"], e["message"]) for e in top] == [("int", 1, "unknown field 'int'")]


def test_the_step_jobs_of_one_run_are_bounded_before_any_is_built(tmp_path):
    # each foreach is within its own bound; together they are not, named where the count passes the run's
    text = ("steps:\n  a:\n    command: x\n  b:\n    foreach: 6000\n    command: y\n"
            "  c:\n    foreach: 6000\n    command: z\n")
    errs = errors_of(tmp_path, text)  # the client's check: before anything is uploaded
    assert [(e["field"], e["line"]) for e in errs] == [("steps.c.foreach", 8)]
    assert errs[0]["message"] == (f"12001 step jobs (each foreach item is one), more than the {MAX_STEP_JOBS} "
                                  f"a run may make")
    many = parse_pipeline({"steps": {f"s{i}": {"command": "x"} for i in range(MAX_STEP_JOBS + 1)}})
    with pytest.raises(InvalidSpec) as exc:
        build(many, {})
    assert [e["field"] for e in exc.value.errors] == ["steps"]
    assert f"more than {MAX_STEP_JOBS} steps" in exc.value.errors[0]["message"]


def test_component_steps_stop_being_expanded_once_the_run_has_too_many_steps(monkeypatch):
    monkeypatch.setattr("trainyard.spec.pipeline_graph.MAX_STEP_JOBS", 5)
    expanded = []

    def expand(name, raw, params):
        expanded.append(name)
        return Expansion({f"{name}-{i}": {"command": "x"} for i in range(3)}, {})

    spec = parse_pipeline({"steps": {f"c{i}": {"component": "x"} for i in range(10)}})
    with pytest.raises(InvalidSpec) as exc:
        build(spec, {}, expand=expand)
    assert expanded == ["c0", "c1"] and [e["field"] for e in exc.value.errors] == ["steps"]



def test_what_a_run_stores_is_bounded_with_each_foreach_item_counted(tmp_path):
    # 9,000 jobs are within MAX_STEP_JOBS; a 10 KB command each is ~90 MB of specs from a 10 KB request
    big = "x" * 10_000
    errs = errors_of(tmp_path, f"steps:\n  a:\n    command: echo\n  b:\n    foreach: 9000\n    command: {big}\n")
    assert [(e["field"], e["line"]) for e in errs] == [("steps.b.foreach", 5)]
    assert errs[0]["message"] == (f"its step jobs' specs come to more than {MAX_RUN_TEXT} characters (each foreach "
                                  "item counted): more than a run may make")
    assert len(graph(tmp_path, f"steps:\n  b:\n    foreach: 5000\n    command: {big}\n")) == 5000


def test_component_steps_stop_being_expanded_once_the_run_has_made_too_much_text(monkeypatch):
    monkeypatch.setattr("trainyard.spec.pipeline_graph.MAX_RUN_TEXT", 10_000)
    expanded = []

    def expand(name, raw, params):
        expanded.append(name)
        return Expansion({name: {"command": "x" * 4_000}}, {})

    spec = parse_pipeline({"steps": {f"c{i}": {"component": "x"} for i in range(10)}})
    with pytest.raises(InvalidSpec) as exc:
        build(spec, {}, expand=expand)
    assert expanded == ["c0", "c1", "c2"] and [e["field"] for e in exc.value.errors] == ["steps"]
    assert "more than 10000 characters" in exc.value.errors[0]["message"]

@pytest.mark.parametrize("path", ["/../../../../j-other/1/outputs/secret.txt", "/a/../../b", "/./a", "//a", "/a//b",
                                  "/a\\..\\b", "/{{item}}/x"])
def test_a_path_after_a_step_reference_stays_inside_that_output(tmp_path, path):
    text = ("params: {p: [..]}\nsteps:\n  a:\n    command: x\n    outputs: [o]\n  b:\n    foreach: '{{params.p}}'\n"
            f"    inputs: {{x: '{{{{steps.a.outputs.o}}}}{path}'}}\n    command: cat {{{{inputs.x}}}}\n")
    errs = errors_of(tmp_path, text)  # an item is put in first: it may be ".." too
    assert [(e["field"], e["line"]) for e in errs] == [("steps.b.inputs.x", 8)]
    assert "must not" in errs[0]["message"] and repr(path.replace("{{item}}", "..")) in errs[0]["message"]


def test_a_serve_model_path_after_the_reference_stays_inside_that_output():
    serve = {"model": "{{steps.a.outputs.m}}/../../x/model.pkl", "name": "m"}
    spec = parse_pipeline({"steps": {"a": {"command": "x", "outputs": ["m"]}, "d": {"serve": serve}}})
    with pytest.raises(InvalidSpec) as exc:
        build(spec, {})
    assert [e["field"] for e in exc.value.errors] == ["steps.d.serve.model"]
    assert "'/../../x/model.pkl' must not have empty, '.' or '..' parts" in exc.value.errors[0]["message"]


@pytest.mark.parametrize("fields, field, line", [
    ("    command: 'true'\n    env_vars: [A=1]\n", "steps.a.env_vars", 4),
    ("    command: 'true'\n    env_vars: A=1\n", "steps.a.env_vars", 4),
    ("    command: 5\n", "steps.a.command", 3),
    ("    command: [echo, 1]\n", "steps.a.command.1", 3),
])
def test_a_job_field_of_the_wrong_type_is_named_not_a_crash(tmp_path, fields, field, line):
    # the job's check names it; the reference checks that follow once read it as a mapping or list of text
    errs = errors_of(tmp_path, "steps:\n  a:\n" + fields)
    assert (field, line) in [(e["field"], e["line"]) for e in errs]


def test_a_steps_labels_leave_room_for_the_runs_own(tmp_path):
    labels = "{" + ", ".join(f"k{i}: v" for i in range(31)) + "}"
    errs = errors_of(tmp_path, f"steps:\n  a:\n    command: x\n    labels: {labels}\n")
    assert [(e["field"], e["line"]) for e in errs] == [("steps.a.labels", 4)]
    assert errs[0]["message"] == ("at most 30 labels here: each step's job also gets trainyard.io/pipeline-run and "
                                  "trainyard.io/step")
    ok = "{" + ", ".join(f"k{i}: v" for i in range(30)) + "}"
    assert len(graph(tmp_path, f"steps:\n  a:\n    command: x\n    labels: {ok}\n")) == 1
