"""Reading a KFP component.yaml: what is accepted, and errors that name the field and the line."""

import pytest

from trainyard.errors import InvalidSpec
from trainyard.pipelines.kfp_component import digest_of, parse_component, safe_name

GOOD = """\
name: Train
inputs:
- {name: Training data, type: Dataset}
- {name: lr, type: Float, default: '0.1'}
- {name: tag, optional: true}
outputs:
- {name: model}
implementation:
  container:
    image: python:3.11
    command: [python3, train.py]
    args:
    - {inputPath: Training data}
    - {concat: [--lr=, {inputValue: lr}]}
    - {if: {cond: {isPresent: tag}, then: [--tag, {inputValue: tag}], else: [--untagged]}}
    - "--out={{$.outputs.artifacts['model'].path}}"
"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(InvalidSpec) as e:
        parse_component(text, "c.yaml")
    return [f"{x['where']}: {x['message']}" for x in e.value.errors]


def test_a_container_component_reads_with_its_inputs_outputs_and_digest():
    comp = parse_component(GOOD, "c.yaml")
    assert list(comp.inputs) == ["Training data", "lr", "tag"]
    assert comp.inputs["lr"].default == "0.1" and comp.inputs["tag"].optional
    assert comp.spec.implementation.container.image == "python:3.11"
    assert comp.digest == digest_of(GOOD) and len(comp.digest) == 64


def test_kfp_names_become_identifiers():
    assert safe_name("Training data") == "training_data"
    assert safe_name("Out-Model 2") == "out_model_2"
    assert safe_name("3d") == "_3d"


def test_an_unknown_input_in_a_placeholder_names_the_line():
    text = GOOD.replace("{inputValue: lr}", "{inputValue: rate}")
    [msg] = errors_of(text)
    assert msg.startswith("c.yaml:14 implementation.container.args[1].concat[1].inputValue")
    assert "unknown input 'rate'" in msg and "Training data, lr, tag" in msg


def test_an_unknown_placeholder_and_an_unknown_output_are_refused():
    text = GOOD.replace("{inputPath: Training data}", "{inputFile: Training data}")
    [msg] = errors_of(text)
    assert "c.yaml:13" in msg and "unknown placeholder 'inputFile'" in msg
    text = GOOD.replace("artifacts['model']", "artifacts['weights']")
    [msg] = errors_of(text)
    assert "c.yaml:16" in msg and "unknown output 'weights'" in msg


def test_unsupported_v2_forms_say_what_to_use():
    text = GOOD.replace("artifacts['model'].path", "artifacts['model'].uri")
    [msg] = errors_of(text)
    assert "not supported" in msg and "{{$.outputs.artifacts['model'].path}}" in msg
    text = GOOD.replace("{inputPath: Training data}", "{inputUri: Training data}")
    assert "inputUri: artifact URIs are not supported" in errors_of(text)[0]
    text = GOOD.replace("- \"--out={{$.outputs.artifacts['model'].path}}\"", "- '{{$.pipeline_job_name}}'")
    assert "unknown placeholder {{$.pipeline_job_name}}" in errors_of(text)[0]


def test_unknown_fields_and_a_missing_implementation_name_their_line():
    extra = GOOD.replace("name: Train\n", "name: Train\nowner: me\n")
    assert errors_of(extra) == ["c.yaml:2 owner: unknown field 'owner'"]
    assert errors_of("name: x\ninputs: []\n") == ["c.yaml:1 implementation: field required"]
    msg = errors_of(GOOD.replace("    image: python:3.11\n", "    image: python:3.11\n    fileOutputs: {}\n"))[0]
    assert "c.yaml:11 implementation.container.fileOutputs: unknown field" in msg


def test_a_bad_if_and_a_bad_argument_are_refused():
    text = GOOD.replace("{cond: {isPresent: tag}", "{cond: {isMissing: tag}")
    assert "a condition is {isPresent: input}" in errors_of(text)[0]
    text = GOOD.replace("- {inputPath: Training data}", "- {inputPath: Training data, inputValue: lr}")
    assert "exactly one key" in errors_of(text)[0]
    text = GOOD.replace("command: [python3, train.py]", "command: [python3, true]")
    assert "c.yaml:11" in errors_of(text)[0] and "quote it" in errors_of(text)[0]


def test_names_that_clash_once_made_identifiers_are_refused():
    text = GOOD.replace("- {name: tag, optional: true}", "- {name: Training-Data}")
    [msg] = errors_of(text)
    assert "c.yaml:5 inputs[2].name" in msg and "clashes with 'Training data'" in msg


def test_a_graph_component_reads():
    comp = parse_component("name: g\nimplementation:\n  graph:\n    tasks:\n      a:\n"
                           "        componentRef: {name: train}\n", "g.yaml")
    assert list(comp.spec.implementation.graph.tasks) == ["a"]
    assert "give exactly one of container or graph" in errors_of("implementation: {}\n")[0]
    msg = errors_of("implementation:\n  graph:\n    tasks:\n      a:\n        componentRef: {}\n")[0]
    assert "c.yaml:5" in msg and "give one of url, digest, name or spec" in msg
