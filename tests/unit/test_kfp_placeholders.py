"""A container component step translated into a plain step, and the translated command run for real."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainyard.errors import InvalidSpec
from trainyard.pipelines.catalog import Catalog
from trainyard.pipelines.special import expand_step, inline_local

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "components"

ECHO = """\
name: Echo
inputs:
- {name: text}
- {name: Data file}
- {name: count, default: '1'}
- {name: flag, optional: true}
- {name: mode, optional: true}
outputs:
- {name: result}
- {name: Total}
implementation:
  container:
    image: alpine:3
    command: [echo]
    args:
    - {inputValue: text}
    - {inputPath: Data file}
    - {concat: [n=, {inputValue: count}, /, {if: {cond: {isPresent: flag}, then: [F], else: [nf]}}]}
    - {if: {cond: {isPresent: flag}, then: [--flag, {inputValue: flag}], else: [--no-flag]}}
    - {if: {cond: {inputValue: mode}, then: [--mode-on]}}
    - {outputPath: result}
    - "v2={{$.inputs.parameters['text']}},{{$.inputs.artifacts['Data file'].path}}"
    - "{{$.outputs.parameters['Total'].output_file}}"
"""


@pytest.fixture
def catalog(tmp_path):
    return Catalog([], tmp_path / "cache")


def expand(catalog, arguments, params=None, name="s", **extra):
    raw = {"component": {"inline": ECHO, "source": "echo.yaml"}, "arguments": arguments, **extra}
    return expand_step(name, raw, catalog, params or {})


def test_every_placeholder_kind_is_translated(catalog):
    exp = expand(catalog, {"text": "hi", "data_file": "{{steps.prep.outputs.data}}", "mode": "true"},
                 resources={"cpu": 2})
    step = exp.steps["s"]
    assert step["command"] == [
        "echo", "hi", "{{inputs.data_file}}", "n=1/nf", "--no-flag", "--mode-on", "{{outputs.result}}",
        "v2=hi,{{inputs.data_file}}", "{{outputs.total}}",
    ]
    assert step["inputs"] == {"data_file": "{{steps.prep.outputs.data}}"}
    assert step["outputs"] == ["result", "total"]
    assert step["resources"] == {"cpu": 2}
    assert exp.outputs == {"result": "s.result", "total": "s.total"}
    assert step["image"] == "alpine:3" and step["image_fallback"] == "fresh-venv"
    assert exp.warnings == ["component image 'alpine:3': runs in it where a container runtime is (podman, docker), "
                            "else on the host in a fresh virtualenv"]


def test_optional_inputs_take_the_other_branch_and_params_stay_for_the_runner(catalog):
    exp = expand(catalog, {"text": "{{params.who}}", "Data file": "some text", "flag": "x", "count": 3,
                           "mode": "{{params.on}}"}, params={"who": "me", "on": False})
    cmd = exp.steps["s"]["command"]
    assert cmd[1] == "{{params.who}}" and cmd[3] == "n=3/F" and cmd[4:6] == ["--flag", "x"]
    assert "--mode-on" not in cmd  # the condition is decided now, from the param's value
    assert exp.steps["s"]["inputs"] == {"data_file": {"value": "some text"}}


def test_a_step_output_used_as_a_value_is_read_at_run_time(catalog):
    exp = expand(catalog, {"text": "{{steps.a.outputs.msg}}", "data_file": {"path": "data/x.csv"}})
    step = exp.steps["s"]
    assert step["command"][:6] == ["python", "-m", "trainyard.pipelines.kfp_exec", "--value",
                                   "text={{inputs.text}}", "--"]
    assert step["command"][7] == "@@kfp:text@@"
    assert step["inputs"] == {"text": "{{steps.a.outputs.msg}}", "data_file": "data/x.csv"}


@pytest.mark.parametrize("arguments, field, words", [
    ({"data_file": "x"}, "arguments.text", "field required: component 'Echo' (echo.yaml) needs input 'text'"),
    ({"text": "a", "data_file": "x", "colour": 1}, "arguments.colour", "unknown argument"),
])
def test_missing_and_unknown_arguments_name_the_step_and_field(catalog, arguments, field, words):
    with pytest.raises(InvalidSpec) as e:
        expand(catalog, arguments)
    [err] = e.value.errors
    assert err["field"] == field and words in err["message"]  # relative: the pipeline puts it under steps.s
    assert err["where"] == f"steps.s.{field}"


def test_an_optional_input_used_outside_an_if_names_the_step_and_line(catalog, tmp_path):
    text = ECHO.replace("- {inputValue: text}", "- {inputValue: flag}")
    with pytest.raises(InvalidSpec) as e:
        expand_step("s", {"component": {"inline": text, "source": "echo.yaml"},
                          "arguments": {"text": "a", "data_file": "x"}}, catalog, {})
    [err] = e.value.errors  # on the step's `component`, the message naming the component file's line
    assert err["field"] == "component"
    assert err["message"].startswith("echo.yaml:16 implementation.container.args[0].inputValue: ")
    assert "step 's': optional input 'flag' is not given" in err["message"]


def test_a_component_step_may_not_set_command_or_outputs(catalog):
    with pytest.raises(InvalidSpec, match=r"steps.s.outputs: not allowed on a component step"):
        expand(catalog, {"text": "a", "data_file": "x"}, outputs=["x"])


def resolve_and_run(step: dict, tmp: Path, params: dict, files: dict[str, Path]) -> subprocess.CompletedProcess:
    """Do what the pipeline runner does with a plain step: paths for inputs and outputs, params filled in."""
    paths = {}
    for name, value in step["inputs"].items():
        if isinstance(value, dict):
            paths[name] = tmp / f"in-{name}"
            paths[name].write_text(value["value"])
        else:
            paths[name] = files[value]
    outdir = tmp / "outputs"

    def sub(arg: str) -> str:
        arg = re.sub(r"\{\{inputs\.(\w+)\}\}", lambda m: str(paths[m.group(1)]), arg)
        arg = re.sub(r"\{\{outputs\.(\w+)\}\}", lambda m: str(outdir / m.group(1)), arg)
        return re.sub(r"\{\{params\.(\w+)\}\}", lambda m: str(params[m.group(1)]), arg)

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([sub(a) for a in step["command"]], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=60)


def test_the_example_component_translates_to_a_command_that_works(catalog, tmp_path):
    raw = inline_local({"scale": {"component": "scale/component.yaml",
                                  "arguments": {"numbers": "1 2\n3.5", "factor": "{{params.f}}", "label": "sum"}}},
                       EXAMPLES)
    exp = expand_step("scale", raw["scale"], catalog, {"f": 10})
    r = resolve_and_run(exp.steps["scale"], tmp_path, {"f": 10}, {})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "sum 65.0"
    assert (tmp_path / "outputs" / "scaled").read_text() == "10\n20\n35\n"
    assert (tmp_path / "outputs" / "total").read_text() == "65"


def test_a_value_from_another_step_is_put_in_by_kfp_exec(catalog, tmp_path):
    (tmp_path / "factor.txt").write_text("4\n")
    (tmp_path / "nums.txt").write_text("1 2")
    raw = inline_local({"scale": {"component": "scale/component.yaml", "arguments": {
        "numbers": "{{steps.a.outputs.nums}}", "factor": "{{steps.b.outputs.factor}}"}}}, EXAMPLES)
    exp = expand_step("scale", raw["scale"], catalog, {})
    files = {"{{steps.a.outputs.nums}}": tmp_path / "nums.txt", "{{steps.b.outputs.factor}}": tmp_path / "factor.txt"}
    r = resolve_and_run(exp.steps["scale"], tmp_path, {}, files)  # "python" is this interpreter, as in a job
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "outputs" / "total").read_text() == "12"
