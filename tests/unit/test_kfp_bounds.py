"""What one component step may cost to read and translate: each bound refuses at once, naming the field."""

import time

import pytest

from trainyard.errors import InvalidSpec
from trainyard.pipelines.catalog import Catalog
from trainyard.pipelines.kfp_component import MAX_NODES
from trainyard.pipelines.kfp_placeholders import MAX_COMMAND, MAX_COMMANDS
from trainyard.pipelines.special import expand_step
from trainyard.spec.lines import MAX_VALUES


@pytest.fixture
def catalog(tmp_path):
    return Catalog([], tmp_path / "cache")


def container(command: str, inputs: str = "[]") -> str:
    return f"name: c\ninputs: {inputs}\nimplementation:\n  container:\n    image: busybox\n    command: {command}\n"


def laughs(levels: int) -> str:
    """Ten-way concats each naming the one before by alias: 10**levels arguments from a few hundred bytes."""
    lines = ["    - {concat: &a0 [x, x, x, x, x, x, x, x, x, x]}"]
    lines += [f"    - {{concat: &a{i} [{', '.join(['{concat: *a%d}' % (i - 1)] * 10)}]}}" for i in range(1, levels + 1)]
    return "name: laughs\nimplementation:\n  container:\n    image: busybox\n    command:\n" + "\n".join(lines) + "\n"


def refused(catalog, component, arguments=None, field="component") -> dict:
    started = time.monotonic()
    with pytest.raises(InvalidSpec) as e:
        expand_step("s", {"component": component, "arguments": arguments or {}}, catalog, {})
    assert time.monotonic() - started < 5  # refused as soon as the bound is passed, not after the work
    [err] = e.value.errors
    assert err["field"] == field  # relative to the step: "" is steps.s itself
    return err


def test_a_component_ref_spec_text_is_read_with_the_budget_inline_text_has(catalog):
    text = laughs(4)  # 11,111 concats: 111,110 values once the aliases are followed
    assert len(text) < 1000
    inline = refused(catalog, {"inline": text})
    as_ref = refused(catalog, {"spec": text})
    assert f"more than {MAX_VALUES} values" in inline["message"]
    assert f"more than {MAX_VALUES} values" in as_ref["message"]
    assert as_ref["message"].startswith("<inline> (steps.s.component.spec)")


def test_more_placeholders_than_a_command_holds_are_refused_naming_where(catalog):
    many = "[echo, " + ", ".join(["x"] * MAX_NODES) + "]"
    err = refused(catalog, {"inline": container(many)})
    assert f"more than {MAX_NODES} arguments and placeholders" in err["message"]
    assert f":6 implementation.container.command[{MAX_NODES}]:" in err["message"]
    task = {"componentRef": {"spec": container(many)}}
    graph_spec = {"name": "g", "implementation": {"graph": {"tasks": {"t": task}}}}
    assert "more than" in refused(catalog, {"spec": graph_spec})["message"]


def test_a_value_repeated_into_a_command_past_its_length_is_refused_before_it_is_made(catalog):
    big = "a" * (MAX_COMMAND // 4 + 1)
    joined = container("[echo, {concat: [{inputValue: x}, {inputValue: x}, {inputValue: x}, {inputValue: x}]}]",
                       "[{name: x}]")
    err = refused(catalog, {"inline": joined}, {"x": big})
    assert f"the command would be longer than {MAX_COMMAND} characters" in err["message"]
    assert "implementation.container.command[1].concat" in err["message"]
    v2 = container('[echo, "' + "{{$.inputs.parameters['x']}}" * 5 + '"]', "[{name: x}]")
    assert "longer than" in refused(catalog, {"inline": v2}, {"x": big})["message"]
    ok = expand_step("s", {"component": {"inline": joined}, "arguments": {"x": "ab"}}, catalog, {})
    assert ok.steps["s"]["command"] == ["echo", "abababab"]


def test_one_text_named_from_many_tasks_counts_each_time_it_is_read(catalog):
    # a small text, read once per task: each read is within the budget, all of them together are not
    leaf = laughs(2).replace("name: laughs", "name: leaf")  # 1,114 values
    tasks = {f"t{i}": {"componentRef": {"spec": leaf}} for i in range(MAX_VALUES // 1000)}
    err = refused(catalog, {"spec": {"name": "g", "implementation": {"graph": {"tasks": tasks}}}})
    assert f"hold more than {MAX_VALUES} values together" in err["message"]


def test_a_graph_expands_to_no_more_steps_than_a_run_may_make(catalog, monkeypatch):
    monkeypatch.setattr("trainyard.pipelines.kfp_expand.MAX_STEP_JOBS", 50)
    leaf = "name: leaf\nimplementation: {container: {image: b, command: [e]}}\n"
    level = {"name": "g", "implementation": {"graph": {"tasks": {f"t{i}": {"componentRef": {"spec": leaf}}
                                                                 for i in range(8)}}}}
    top = {"name": "top", "implementation": {"graph": {"tasks": {f"t{i}": {"componentRef": {"spec": level}}
                                                                 for i in range(8)}}}}
    err = refused(catalog, {"spec": top}, field="")
    assert err["message"] == "expands to more than 50 steps: a run makes at most 50 step jobs"
    assert len(expand_step("s", {"component": {"spec": level}}, catalog, {}).steps) == 8


def test_a_graphs_tasks_together_make_no_more_command_text_than_one_step_may(catalog):
    # each task's command is within MAX_COMMAND; 40 tasks of 0.5 MB are 20 MB from a few KB of text
    leaf = container('[echo, "' + "{{$.inputs.parameters['x']}}" * 4 + '"]', "[{name: x}]")
    value = "a" * (MAX_COMMAND // 8)
    tasks = {f"t{i}": {"componentRef": {"spec": leaf}, "arguments": {"x": value}} for i in range(40)}
    err = refused(catalog, {"spec": {"name": "g", "implementation": {"graph": {"tasks": tasks}}}})
    assert f"its tasks' commands together would be longer than {MAX_COMMANDS} characters" in err["message"]
    few = {k: tasks[k] for k in list(tasks)[:8]}
    assert len(expand_step("s", {"component": {"spec": {"name": "g", "implementation": {"graph": {"tasks": few}}}}},
                           catalog, {}).steps) == 8
