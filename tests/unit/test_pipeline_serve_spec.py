"""A pipeline's ``serve`` step: read, checked (errors name the field and the line), turned into the same
service spec ``trainyard serve`` applies."""

import pytest

from trainyard.errors import InvalidSpec
from trainyard.spec.pipeline_file import load_pipeline
from trainyard.spec.pipeline_graph import build
from trainyard.spec.serve import ServeStep, serve_spec

GOOD = """\
name: digits
params: {service: digits}
steps:
  train:
    command: python train.py {{outputs.model}}
    outputs: [model]
  deploy:
    serve:
      model: "{{steps.train.outputs.model}}/model.pkl"
      name: "{{params.service}}"
      autoscale: {min: 1, max: 3}
      timeout: 2m
"""


def load(tmp_path, text):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    loaded = load_pipeline(path)
    return {i.name: i for i in build(loaded.spec, loaded.params).instances}


def errors_of(tmp_path, text):
    with pytest.raises(InvalidSpec) as exc:
        load(tmp_path, text)
    return [(e["field"], e["line"], e["message"]) for e in exc.value.errors]


def test_a_serve_step_needs_its_model_step_and_builds_the_service_trainyard_serve_would(tmp_path):
    deploy = load(tmp_path, GOOD)["deploy"]
    assert deploy.needs == ["train"] and deploy.outputs == [] and deploy.cache is False
    assert deploy.inputs["model"] | {} == {"kind": "step", "step": "train", "output": "model",
                                           "subpath": "/model.pkl", "from": ["train"], "fan_in": False}
    step = ServeStep.model_validate(deploy.job["serve"])
    assert step.name == "digits" and step.timeout == 120
    built = step.service("file:///m/model.pkl")
    same = serve_spec("file:///m/model.pkl", "digits", minimum=1, maximum=3)
    assert built.model_dump() == same.model_dump()


def test_a_model_given_by_job_id_is_served_from_that_jobs_outputs(tmp_path):
    text = GOOD.replace('"{{steps.train.outputs.model}}/model.pkl"', "j-abc").replace("autoscale: {min: 1, max: 3}",
                                                                                         "replicas: 2")
    deploy = load(tmp_path, text)["deploy"]
    assert deploy.inputs == {} and deploy.needs == []
    spec = ServeStep.model_validate(deploy.job["serve"]).service(deploy.job["serve"]["model"])
    assert spec.inputs["model"] == "job://j-abc" and spec.service.replicas == 2


@pytest.mark.parametrize("change, field, line, words", [
    ('      timeout: 2m\n', "steps.deploy.serve.autoscale", 11, "not both"),
    ('      name: "{{params.service}}"\n', "steps.deploy.serve.name", 8, "required"),
    ("      timeout: 2m\n", "steps.deploy.serve.timeout", 12, "duration"),
    ("      timeout: 2m\n", "steps.deploy.serve.format", 13, "sklearn"),
    ('      name: "{{params.service}}"\n', "steps.deploy.serve.name", 10, "letters, digits"),
    ('      model: "{{steps.train.outputs.model}}/model.pkl"\n', "steps.deploy.serve.model", 9, "no output"),
    ('      model: "{{steps.train.outputs.model}}/model.pkl"\n', "steps.deploy.serve.model", 9, "starts it"),
    ("  deploy:\n", "steps.deploy.command", 8, "only serve:, needs: and workdir:"),
    ("      timeout: 2m\n", "steps.deploy.serve.resources.gpu", 13, "greater than or equal"),
])
def test_bad_serve_steps_name_the_field_and_line(tmp_path, change, field, line, words):
    replacement = {
        "steps.deploy.serve.autoscale": "      timeout: 2m\n      replicas: 2\n",
        "steps.deploy.serve.timeout": "      timeout: soon\n",
        "steps.deploy.serve.format": "      timeout: 2m\n      format: onnx\n",
        "steps.deploy.serve.model": ('      model: "{{steps.train.outputs.weights}}"\n' if words == "no output"
                                     else '      model: "s3://b/{{steps.train.outputs.model}}"\n'),
        "steps.deploy.command": "  deploy:\n    command: echo hi\n",
        "steps.deploy.serve.resources.gpu": "      timeout: 2m\n      resources: {gpu: -1}\n",
    }.get(field, "" if words == "required" else '      name: "Digits Model"\n')
    errors = errors_of(tmp_path, GOOD.replace(change, replacement))
    found = [e for e in errors if e[0] == field]
    assert found, errors
    assert found[0][1] == line and words in found[0][2], errors


def test_a_foreach_steps_output_is_not_one_model(tmp_path):
    text = GOOD.replace("  train:\n", "  train:\n    foreach: 2\n")
    (field, _, message), = errors_of(tmp_path, text)
    assert field == "steps.deploy.serve.model" and "once per item" in message


def service(replicas, status="running", autoscale=None, wanted=1):
    from trainyard.spec.service import ServiceInfo, ServiceReplica

    spec = serve_spec("file:///m", "digits", minimum=autoscale[0] if autoscale else None,
                      maximum=autoscale[1] if autoscale else None)
    return ServiceInfo(id="s-1", name="digits", status=status, reason="1 replica starting", queue="default", version=2,
                       spec=spec, wanted=wanted, created_at=0, updated_at=0, url="/serve/digits/",
                       replicas=[ServiceReplica(job_id=j, version=v, status=st, ready=ready, reason=why)
                                 for j, v, st, ready, why in replicas])


def test_a_serve_step_is_done_when_a_replica_of_its_version_is_ready_and_fails_after_its_timeout():
    from trainyard.services.pipeline_serve import outcome

    old_ready = service([("j-old", 1, "running", True, None), ("j-new", 2, "running", False, None)])
    assert outcome(old_ready, 2, waited=1, timeout=60).state is None  # the old version answering is not enough
    new_ready = service([("j-old", 1, "running", True, None), ("j-new", 2, "running", True, None)])
    done = outcome(new_ready, 2, waited=1, timeout=60)
    assert done.state.value == "succeeded" and "version 2 ready at /serve/digits/" in done.reason
    crashed = service([("j-new", 2, "failed", False, "exit code 1: no model at /m")])
    late = outcome(crashed, 2, waited=61, timeout=60)
    assert late.state.value == "failed" and "within 60s" in late.reason and "j-new failed: exit code 1" in late.reason
    assert outcome(service([], status="stopping"), 2, waited=0, timeout=60).state.value == "failed"
    idle = outcome(service([], autoscale=(0, 2), wanted=0), 2, waited=0, timeout=60)
    assert idle.state.value == "succeeded" and "scaled to zero" in idle.reason


def test_a_factory_module_is_served_with_the_code_of_the_folder_it_is_served_from():
    assert serve_spec("j-abc", "imdb", module="serving:ReviewClassifier").workdir == "."
    assert serve_spec("j-abc", "digits").workdir is None  # a pickle needs no code: nothing is uploaded
