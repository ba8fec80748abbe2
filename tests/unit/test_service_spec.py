"""Service specs: the service: block, its validation (field and line named, numbers finite and in range),
the replica job each service runs, and the input references trainyard serve uses."""

import shlex
import subprocess

import pytest
from pydantic import ValidationError

from trainyard.errors import InvalidSpec
from trainyard.services.service_jobs import replica_job, resolve_ref, with_port
from trainyard.spec.loader import parse_model
from trainyard.spec.service import Autoscale, ServiceSpec
from trainyard.sdk.services import model_ref, serve_spec


def parse(text: str) -> ServiceSpec:
    return parse_model(ServiceSpec, text, "svc.yaml")


def errors_of(text: str) -> dict[str, dict]:
    with pytest.raises(InvalidSpec) as exc:
        parse(text)
    return {e["field"]: e for e in exc.value.errors}


def test_a_service_spec_parses_with_durations_and_defaults():
    spec = parse("name: web\ncommand: python app.py --port {{port}}\n"
                 "service:\n  readiness: {path: /healthz, initial_delay: 2s, period: 1s}\n"
                 "  autoscale: {min: 0, max: 4, target_concurrency: 8, scale_down_after: 5m}\n")
    assert spec.service.readiness.initial_delay == 2 and spec.service.autoscale.scale_down_after == 300
    assert spec.preemptible is False and spec.service.cold_start_timeout == 60
    assert parse("command: x\nkind: service\n").service.replicas == 1  # kind alone: one replica


@pytest.mark.parametrize("text, field, line, words", [
    ("command: x\nservice:\n  replicas: -1\n", "service.replicas", 3, "greater than or equal to 0"),
    ("command: x\nservice:\n  replicas: 1000\n", "service.replicas", 3, "less than or equal to 100"),
    ("command: x\nservice:\n  port: 70000\n", "service.port", 3, "65535"),
    ("command: x\nservice:\n  readiness:\n    period: .nan\n", "service.readiness.period", 4, "duration"),
    ("command: x\nservice:\n  readiness:\n    path: healthz\n", "service.readiness.path", 4, "absolute"),
    ("command: x\nservice:\n  autoscale:\n    target_concurrency: .inf\n",
     "service.autoscale.target_concurrency", 4, "finite"),
    ("command: x\nservice:\n  autoscale:\n    min: 3\n    max: 1\n", "service.autoscale", 3, "min (3) is more than max"),
    ("command: x\nservice:\n  replicas: 2\n  autoscale: {max: 2}\n", "service", 2, "not both"),
    ("command: x\nservice:\n  replica: 2\n", "service.replica", 3, "did you mean 'replicas'"),
    ("command: x\nkind: service\nreplicas: 2\n", "replicas", 3, "service.replicas"),
])
def test_bad_service_fields_are_named_with_their_line(text, field, line, words):
    errs = errors_of(text)
    assert field in errs, errs
    assert errs[field]["line"] == line and words in errs[field]["message"], errs[field]


def test_autoscale_wants_ceil_of_concurrency_within_bounds():
    auto = Autoscale(min=1, max=4, target_concurrency=8)
    assert [auto.wanted(n) for n in (0, 1, 8, 9, 17, 1000)] == [1, 1, 1, 2, 3, 4]


def test_the_port_reaches_string_and_list_commands_as_one_word(tmp_path):
    env = {"TRAINYARD_SERVICE_PORT": "8123", "PATH": "/usr/bin:/bin"}
    as_list = with_port(["printf", "%s|", "--port={{port}}", "a b", "{{ port }}"], {})
    out = subprocess.run(["bash", "-c", as_list], env=env, capture_output=True, text=True).stdout
    assert out == "--port=8123|a b|8123|"
    as_text = with_port("printf '%s|' {{port}}", {})
    assert subprocess.run(["bash", "-c", as_text], env=env, capture_output=True, text=True).stdout == "8123|"


def test_a_replica_job_has_no_retry_of_its_own_and_knows_its_service():
    spec = ServiceSpec.model_validate({"name": "web", "command": ["app", "{{port}}"], "retry": {"max": 3},
                                       "params": {"x": 1}, "service": {"replicas": 2}, "labels": {"team": "a"}})
    job = replica_job("s-1", spec, version=3)
    assert job.retry.max == 0 and not job.preemptible
    assert job.env_vars["TRAINYARD_SERVICE"] == "s-1" and job.env_vars["TRAINYARD_SERVICE_VERSION"] == "3"
    assert shlex.split(job.command)[:2] == ["exec", "app"]
    assert job.labels == {"team": "a", "trainyard.io/service": "web", "trainyard.io/service-version": "3"}


def test_a_service_leaves_room_for_its_replicas_own_labels():
    with pytest.raises(ValidationError, match="at most 30 labels here: each replica also gets"):
        ServiceSpec.model_validate({"name": "web", "command": "app", "labels": {f"k{i}": "v" for i in range(31)}})


def test_input_references_resolve_to_artifact_urls_and_bad_paths_are_named():
    jobs = {"j-1": "file:///a/jobs/j-1/1/outputs"}
    look = lambda k: jobs[k]  # noqa: E731
    art = lambda k: f"file:///a/art/{k}"  # noqa: E731
    assert resolve_ref("model", "job://j-1", look, art) == "file:///a/jobs/j-1/1/outputs"
    assert resolve_ref("model", "job://j-1/m/model.pkl", look, art) == "file:///a/jobs/j-1/1/outputs/m/model.pkl"
    assert resolve_ref("model", "artifact://a-9", look, art) == "file:///a/art/a-9"
    assert resolve_ref("model", "s3://b/k", look, art) == "s3://b/k"
    with pytest.raises(InvalidSpec) as exc:
        resolve_ref("model", "job://j-1/../../etc", look, art)
    assert exc.value.errors[0]["field"] == "inputs.model"


def test_serve_builds_a_model_server_service_over_the_source():
    spec = serve_spec("j-abc", "digits", minimum=0, maximum=3)
    assert spec.inputs == {"model": "job://j-abc"} and spec.service.autoscale.max == 3
    assert "-m trainyard.serving.model_server" in spec.command and "{{port}}" in spec.command
    assert spec.service.readiness.path == "/v2/health/ready"
    assert model_ref("sha256:00") == "artifact://sha256:00" and model_ref("a-1") == "artifact://a-1"
    assert serve_spec("j-abc", "digits").service.replicas == 1
    assert "--module" not in spec.command
    # a factory for a state dict (the IMDB example's) is passed on, quoted before a shell sees it
    assert serve_spec("j-abc", "imdb", module="serving:ReviewClassifier; rm -rf /").command.endswith(
        "--module 'serving:ReviewClassifier; rm -rf /'")


def test_serve_autoscale_knobs_turn_autoscaling_on_and_are_checked_as_in_a_spec():
    auto = serve_spec("j-abc", "digits", target_concurrency=2, scale_down_after="90s").service.autoscale
    assert (auto.min, auto.max, auto.target_concurrency, auto.scale_down_after) == (0, 1, 2, 90)
    assert serve_spec("j-abc", "digits", minimum=2).service.autoscale.max == 2
    for kwargs, field, message in [
        ({"target_concurrency": 0}, "service.autoscale.target_concurrency", "greater than 0"),
        ({"scale_down_after": "soon"}, "service.autoscale.scale_down_after", "soon"),
        ({"minimum": 3, "maximum": 1}, "service.autoscale", "min (3) is more than max (1)"),
        ({"maximum": 0}, "service.autoscale.max", "greater than or equal to 1"),
        ({"replicas": 2, "target_concurrency": 4}, "service", "not both"),
    ]:
        with pytest.raises(InvalidSpec) as exc:
            serve_spec("j-abc", "digits", **kwargs)
        assert exc.value.errors[0]["field"] == field and message in exc.value.errors[0]["message"], exc.value.errors


def test_the_serve_command_hands_its_autoscale_flags_to_the_specs_checks():
    from typer.testing import CliRunner

    from trainyard.cli.main import app

    # refused before any server is asked: the exit status and message come from the spec's own check (a
    # --target-concurrency out of range is refused sooner, as the flag: tests/unit/test_cli_numbers.py)
    bad = CliRunner().invoke(app, ["serve", "j-abc", "--name", "digits", "--min", "0", "--max", "0",
                                   "--target-concurrency", "2", "--scale-down-after", "2m"])
    assert bad.exit_code == 2 and "service.autoscale.max" in bad.output, bad.output
    bad = CliRunner().invoke(app, ["serve", "j-abc", "--name", "digits", "--scale-down-after", "later"])
    assert bad.exit_code == 2 and "service.autoscale.scale_down_after" in bad.output, bad.output


def test_trainyard_run_of_a_service_spec_says_how_to_start_it(tmp_path):
    from trainyard.spec.loader import load_job

    path = tmp_path / "svc.yaml"
    path.write_text("command: python -m http.server {{port}}\nservice:\n  replicas: 1\n")
    with pytest.raises(InvalidSpec) as exc:
        load_job(path)
    assert any("trainyard service apply" in e["message"] for e in exc.value.errors)


def test_the_example_service_spec_is_valid():
    from pathlib import Path

    from trainyard.sdk.services import load_service

    spec = load_service(Path(__file__).resolve().parents[2] / "examples" / "services" / "web.yaml")
    assert spec.service.autoscale.min == 0 and "{{port}}" in spec.command
