"""Notebook steps and notebook jobs: what command they run, with which params, outputs and env."""

import json
from pathlib import Path

import pytest

from trainyard.errors import InvalidSpec
from trainyard.pipelines.notebook import job_from_notebook, with_notebook_env
from trainyard.pipelines.notebook_run import parse_params
from trainyard.pipelines.special import expand_step, is_special
from trainyard.spec.job import JobSpec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "notebooks" / "fit.ipynb"


def params_of(argv: list[str]) -> dict:
    return parse_params([argv[i + 1] for i, a in enumerate(argv) if a == "-p"])


def test_a_notebook_step_becomes_a_plain_step_that_keeps_the_executed_notebook():
    raw = {"notebook": "nb/fit.ipynb", "params": {"lr": "{{params.lr}}", "name": "run-{{params.lr}}", "n": 3,
                                                  "tag": "007"},
           "resources": {"gpu": 1}, "needs": ["prep"], "inputs": {"d": "{{steps.prep.outputs.d}}"}, "outputs": ["m"]}
    assert is_special(raw)
    exp = expand_step("fit", raw, None, {"lr": 0.1, "other": 1})
    step = exp.steps["fit"]
    assert step["command"][:6] == ["python", "-m", "trainyard.pipelines.notebook_run", "nb/fit.ipynb", "--out",
                                   "{{outputs.notebook}}/fit.ipynb"]
    # types survive the command line: a whole reference keeps the param's type, text stays text
    assert params_of(step["command"]) == {"lr": 0.1, "name": "run-0.1", "n": 3, "tag": "007"}
    assert step["outputs"] == ["m", "notebook"] and step["inputs"] == {"d": "{{steps.prep.outputs.d}}"}
    assert step["resources"] == {"gpu": 1} and step["needs"] == ["prep"] and "params" not in step
    assert exp.outputs == {"m": "fit.m", "notebook": "fit.notebook"}


def test_a_step_with_its_own_env_gets_papermill_and_a_kernel():
    exp = expand_step("fit", {"notebook": "a.ipynb", "env": {"pip": ["numpy==2.0", "IPyKernel>=6.1"]}}, None, {})
    assert exp.steps["fit"]["env"]["pip"] == ["numpy==2.0", "IPyKernel>=6.1", "papermill>=2.5"]
    assert with_notebook_env(None) is None  # no env: the server's interpreter, which has them


@pytest.mark.parametrize("raw, field, words", [
    ({"notebook": "a.py"}, "notebook", "expected the path of a .ipynb file"),
    ({"notebook": "a.ipynb", "params": {"lr": "{{params.nope}}"}}, "params.lr", "unknown param 'nope'"),
    ({"notebook": "a.ipynb", "command": "x"}, "command", "the notebook is the command"),
    ({"notebook": "a.ipynb", "component": "c.yaml"}, "", "not both"),
])
def test_bad_notebook_steps_name_the_field(raw, field, words):
    with pytest.raises(InvalidSpec) as e:
        expand_step("s", raw, None, {"lr": 1})
    [err] = e.value.errors
    assert err["field"] == field and words in err["message"]


def test_a_notebook_job_runs_in_the_notebooks_folder_with_its_params():
    data = job_from_notebook(EXAMPLE, {"lr": 0.5, "epochs": 3})
    spec = JobSpec.model_validate(data)
    assert spec.name == "fit" and spec.workdir == "." and spec.params == {"lr": 0.5, "epochs": 3}
    assert spec.argv()[:4] == ["python", "-m", "trainyard.pipelines.notebook_run", "fit.ipynb"]
    assert params_of(spec.argv()) == {"lr": 0.5, "epochs": 3}


def test_a_file_that_is_no_notebook_is_refused(tmp_path):
    bad = tmp_path / "x.ipynb"
    bad.write_text(json.dumps({"hello": 1}))
    with pytest.raises(InvalidSpec, match="not a Jupyter notebook"):
        job_from_notebook(bad, {})


def test_command_line_params_read_as_json_then_yaml_then_text():
    assert parse_params(['a=0.1', 'b="x y"', "c=true", "d=[1, 2]", "e=hello world", "f="]) == \
        {"a": 0.1, "b": "x y", "c": True, "d": [1, 2], "e": "hello world", "f": ""}
