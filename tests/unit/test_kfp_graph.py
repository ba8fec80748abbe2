"""Graph components: tasks become sub-steps named {step}-{task}, wired by references."""

import textwrap
from pathlib import Path

import pytest
import yaml

from trainyard.errors import InvalidSpec
from trainyard.pipelines.catalog import Catalog
from trainyard.pipelines.kfp_component import digest_of
from trainyard.pipelines.special import expand_step, inline_local

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "components"

ADD = """\
name: Add one
inputs: [{name: x}]
outputs: [{name: y}]
implementation:
  container:
    image: python:3.11
    command: [python3, add.py, {inputPath: x}, {outputPath: y}]
"""


def graph(tasks: dict, outputs: dict | None = None,
          inputs: str = "[{name: start}, {name: opt, optional: true}]") -> str:
    body = {"tasks": tasks, **({"outputValues": outputs} if outputs else {})}
    out = "outputs: [{name: result}]\n" if outputs else ""
    return f"name: g\ninputs: {inputs}\n{out}implementation:\n" + textwrap.indent(yaml.safe_dump({"graph": body}), "  ")


def out(task: str, name: str = "y") -> dict:
    return {"taskOutput": {"taskId": task, "outputName": name}}


@pytest.fixture
def catalog(tmp_path):
    folder = tmp_path / "components"
    (folder / "add-one").mkdir(parents=True)
    (folder / "add-one" / "component.yaml").write_text(ADD)
    (folder / "notes.yaml").write_text("just: a file that is no component\n")
    return Catalog([str(folder)], tmp_path / "cache")


def expand(catalog, text, arguments=None, params=None, **extra):
    raw = {"component": {"inline": text, "source": "/p/g.yaml"}, "arguments": arguments or {"start": "1"}, **extra}
    return expand_step("calc", raw, catalog, params or {})


def test_tasks_resolve_by_name_digest_and_inline_spec_and_chain_by_reference(catalog):
    text = graph({
        "first": {"componentRef": {"name": "Add one"}, "arguments": {"x": {"graphInput": {"inputName": "start"}}}},
        "Second Task": {"componentRef": {"digest": digest_of(ADD)}, "arguments": {"x": out("first")}},
        "third": {"componentRef": {"spec": yaml.safe_load(ADD)}, "arguments": {"x": out("Second Task")}},
    }, {"result": out("third")})
    exp = expand(catalog, text, needs=["prep"], resources={"cpu": 2})
    assert list(exp.steps) == ["calc-first", "calc-second-task", "calc-third"]
    first, second, third = exp.steps.values()
    assert first["inputs"] == {"x": {"value": "1"}}
    assert second["inputs"] == {"x": "{{steps.calc-first.outputs.y}}"}
    assert third["inputs"] == {"x": "{{steps.calc-second-task.outputs.y}}"}
    assert all(s["needs"] == ["prep"] and s["resources"] == {"cpu": 2} for s in exp.steps.values())
    assert exp.outputs == {"result": "calc-third.y"}
    assert exp.warnings == ["component image 'python:3.11': runs in it where a container runtime is (podman, "
                            "docker), else on the host in a fresh virtualenv"]


def test_tasks_run_in_dependency_order_whatever_order_they_are_written_in(catalog):
    text = graph({"b": {"componentRef": {"name": "add-one"}, "arguments": {"x": out("a")}},
                  "a": {"componentRef": {"name": "add-one"}, "arguments": {"x": "{{params.seed}}"}}})
    exp = expand(catalog, text, params={"seed": 41})
    assert list(exp.steps) == ["calc-a", "calc-b"]
    assert exp.steps["calc-a"]["inputs"] == {"x": {"value": "41"}}  # a file holding the param's value


def test_graph_inputs_pass_on_step_references_and_an_absent_optional_input_lets_the_default_hold(catalog):
    child = ADD.replace("inputs: [{name: x}]", "inputs: [{name: x}, {name: z, default: '7'}]") \
               .replace("{outputPath: y}]", "{inputValue: z}, {outputPath: y}]")
    text = graph({"t": {"componentRef": {"spec": yaml.safe_load(child)},
                        "arguments": {"x": {"graphInput": {"inputName": "start"}},
                                      "z": {"graphInput": {"inputName": "opt"}}}}})
    exp = expand(catalog, text, {"start": "{{steps.prep.outputs.data}}"})
    step = exp.steps["calc-t"]
    assert step["inputs"] == {"x": "{{steps.prep.outputs.data}}"}
    assert step["command"][3] == "7"


def test_a_nested_graph_expands_with_prefixed_names_and_maps_its_outputs(catalog):
    inner = yaml.safe_load(graph({"leaf": {"componentRef": {"name": "add-one"},
                                           "arguments": {"x": {"graphInput": {"inputName": "start"}}}}},
                                 {"result": out("leaf")}))
    text = graph({"inner": {"componentRef": {"spec": inner}, "arguments": {"start": "5"}},
                  "after": {"componentRef": {"name": "add-one"}, "arguments": {"x": out("inner", "result")}}},
                 {"result": out("after")})
    exp = expand(catalog, text)
    assert list(exp.steps) == ["calc-inner-leaf", "calc-after"]
    assert exp.steps["calc-after"]["inputs"] == {"x": "{{steps.calc-inner-leaf.outputs.y}}"}


def test_the_example_graph_component_reads_its_task_by_relative_url(catalog):
    raw = inline_local({"s": {"component": "scale_twice.yaml", "arguments": {"numbers": {"path": "numbers.txt"}}}},
                       EXAMPLES)
    assert len(raw["s"]["component"]["files"]) == 1  # the client shipped scale/component.yaml along
    exp = expand_step("s", raw["s"], catalog, {})
    assert list(exp.steps) == ["s-first", "s-second"]
    assert exp.steps["s-first"]["inputs"] == {"numbers": str(EXAMPLES / "numbers.txt")}  # made absolute
    with pytest.raises(InvalidSpec, match=r"steps.s.arguments.numbers: 'nope.txt' does not exist"):
        inline_local({"s": {"component": "scale_twice.yaml", "arguments": {"numbers": {"path": "nope.txt"}}}}, EXAMPLES)
    assert "--factor=3" in exp.steps["s-second"]["command"]
    assert exp.outputs == {"scaled": "s-second.scaled", "total": "s-second.total"}


@pytest.mark.parametrize("tasks, outputs, words", [
    ({"a": {"componentRef": {"name": "add-one"}, "arguments": {"x": out("b")}},
      "b": {"componentRef": {"name": "add-one"}, "arguments": {"x": out("a")}}},
     None, "tasks form a cycle: a -> b -> a"),
    ({"a": {"componentRef": {"name": "add-one"}, "arguments": {"x": out("nope")}}}, None, "unknown task 'nope'"),
    ({"a": {"componentRef": {"name": "add-one"}, "arguments": {"x": out("a2", "zz")}},
      "a2": {"componentRef": {"name": "add-one"}, "arguments": {"x": "1"}}}, None, "task 'a2' has no output 'zz'"),
    ({"a": {"componentRef": {"name": "add-one"}, "arguments": {"x": {"graphInput": {"inputName": "nope"}}}}},
     None, "unknown graph input 'nope'"),
    ({"a": {"componentRef": {"name": "subtract"}, "arguments": {"x": "1"}}}, None, "no component named 'subtract'"),
    ({"a": {"componentRef": {"name": "add-one"}, "arguments": {"x": "1"}}}, {"result": out("a", "q")},
     "task 'a' has no output 'q'"),
    ({"a": {"componentRef": {"name": "add-one"}, "arguments": {}}}, None, "needs input 'x'"),
])
def test_bad_graphs_are_refused_naming_the_file_line_and_field(catalog, tasks, outputs, words):
    with pytest.raises(InvalidSpec) as e:
        expand(catalog, graph(tasks, outputs))
    msg = str(e.value)
    assert words in msg
    assert "/p/g.yaml:" in msg and "implementation.graph." in msg


def test_a_graph_component_step_may_not_fan_out(catalog):
    text = graph({"first": {"componentRef": {"name": "Add one"}, "arguments": {"x": {"graphInput": {"inputName": "start"}}}}},
                 {"result": out("first")})
    with pytest.raises(InvalidSpec) as exc:
        expand(catalog, text, foreach=3)
    assert exc.value.errors[0]["field"].endswith("foreach") and "graph component" in exc.value.errors[0]["message"]
    assert list(expand(catalog, text).steps) == ["calc-first"]
