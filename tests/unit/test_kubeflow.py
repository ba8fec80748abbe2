import logging
import textwrap

import pytest

from trainyard.errors import InvalidSpec
from trainyard.spec import JobSpec, load_job
from trainyard.spec.kubeflow import Converted, parse_pytorchjob

# Kubeflow's mnist example (training-operator examples/pytorch/mnist), grown to 1 Master + 3 Workers,
# with the fields people usually carry along. Line numbers below refer to this text.
MNIST = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pytorch-dist-mnist-gloo
  namespace: kubeflow
spec:
  runPolicy:
    backoffLimit: 3
    activeDeadlineSeconds: 3600
    cleanPodPolicy: None
    ttlSecondsAfterFinished: 600
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        metadata:
          annotations:
            sidecar.istio.io/inject: "false"
        spec:
          containers:
            - name: pytorch
              image: kubeflow/pytorch-dist-mnist:latest
              imagePullPolicy: Always
              command: [python, /opt/mnist/src/mnist.py]
              args: ["--epochs=1"]
              resources:
                limits:
                  nvidia.com/gpu: 1
              volumeMounts:
                - {name: data, mountPath: /data}
          volumes:
            - {name: data, emptyDir: {}}
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        spec:
          tolerations:
            - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
          containers:
            - name: pytorch
              image: kubeflow/pytorch-dist-mnist:latest
              command: [python, /opt/mnist/src/mnist.py]
              args: ["--epochs=1"]
              resources:
                limits:
                  nvidia.com/gpu: 1
"""


def convert(text: str) -> Converted:
    return parse_pytorchjob(textwrap.dedent(text), "job.yaml")


def errors_of(text: str) -> list[dict]:
    with pytest.raises(InvalidSpec) as exc:
        convert(text)
    return exc.value.errors


def warned(c: Converted) -> dict[str, dict]:
    return {w["field"]: w for w in c.warnings}


def manifest(master: str, worker: str = "", extra: str = "") -> str:
    """A minimal manifest; ``master``/``worker`` are the container's extra lines (8-space indent)."""
    def replica(kind: str, n: int, body: str) -> str:
        return (f"    {kind}:\n      replicas: {n}\n      template:\n        spec:\n          containers:\n"
                f"            - name: pytorch\n              command: [python, train.py]\n"
                + textwrap.indent(textwrap.dedent(body), " " * 14))
    text = "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  name: t\nspec:\n"
    text += extra + "  pytorchReplicaSpecs:\n" + replica("Master", 1, master)
    return text + (replica("Worker", 1, worker) if worker else "")


# -- what maps -------------------------------------------------------------------


def test_the_mnist_example_converts_exactly():
    c = convert(MNIST)
    assert c.spec == JobSpec(
        name="pytorch-dist-mnist-gloo",
        command=["python", "/opt/mnist/src/mnist.py", "--epochs=1"],
        replicas=4, distributed="torch",
        resources={"gpu": 1},
        retry={"max": 3},
        timeout=3600,
        image="kubeflow/pytorch-dist-mnist:latest", image_pull_policy="always", image_fallback="host",
    )
    assert c.image == "kubeflow/pytorch-dist-mnist:latest"
    assert c.env_vars == {}


def test_resources_env_node_selector_and_nproc_per_node():
    c = convert(manifest(
        """\
        env:
          - {name: NCCL_DEBUG, value: INFO}
          - {name: EMPTY}
        resources:
          requests: {cpu: 500m, memory: 1Gi}
          limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: 2}
        """,
        extra="  nprocPerNode: auto\n",
    ).replace("          containers:", "          nodeSelector: {gpu: a100}\n          containers:", 1))
    r = c.spec.resources
    assert (r.cpu, r.memory, r.gpu, r.node_selector) == (2.0, 4 * 2**30, 2, {"gpu": "a100"})
    assert c.spec.procs_per_replica == 2  # auto: one per GPU, as torchrun does
    assert c.env_vars == {"NCCL_DEBUG": "INFO", "EMPTY": ""} == c.spec.env_vars  # the job gets them
    assert c.spec.replicas == 1 and c.spec.distributed == "torch"
    assert "using the limit" in warned(c)[
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.requests.cpu"]["message"]


def test_requests_are_used_when_there_are_no_limits_and_nproc_may_be_a_string():
    c = convert(manifest("resources: {requests: {cpu: 1, memory: 512Mi}}\n", extra='  nprocPerNode: "4"\n'))
    assert (c.spec.resources.cpu, c.spec.resources.memory, c.spec.procs_per_replica) == (1.0, 512 * 2**20, 4)


def test_workdir_annotation_says_where_the_code_is():
    c = convert(manifest("").replace("  name: t\n", "  name: t\n  annotations: {trainyard.io/workdir: src}\n"))
    assert c.spec.workdir == "src"
    assert c.warnings == []


# -- what does not map is named ------------------------------------------------------


def test_unsupported_fields_are_named_with_their_path_and_line():
    c = convert(MNIST)
    by_field = warned(c)
    master = "spec.pytorchReplicaSpecs.Master"
    worker = "spec.pytorchReplicaSpecs.Worker"
    expected = {
        "metadata.namespace": 5,
        "spec.runPolicy.cleanPodPolicy": 10,
        "spec.runPolicy.ttlSecondsAfterFinished": 11,
        f"{master}.restartPolicy": 15,
        f"{master}.template.metadata": 17,
        f"{master}.template.spec.containers[0].volumeMounts": 30,
        f"{master}.template.spec.volumes": 32,
        f"{worker}.restartPolicy": 36,
        f"{worker}.template.spec.tolerations": 39,
    }
    assert {f: by_field[f]["line"] for f in expected} == expected
    assert by_field[f"{master}.template.spec.volumes"]["where"] == f"job.yaml:32 {master}.template.spec.volumes"
    image = by_field[f"{master}.template.spec.containers[0].image"]
    assert image["message"] == ("image kubeflow/pytorch-dist-mnist:latest: runs in it where a container runtime "
                                "is (podman, docker), else on the host in the job's env")
    assert set(by_field) == set(expected) | {image["field"]}  # nothing else,
    assert len(c.warnings) == len(by_field)  # nothing twice (the Worker's image is the Master's)


def test_elastic_policy_sidecars_and_value_from_are_named():
    text = manifest(
        """\
        env:
          - name: REGION
            valueFrom: {configMapKeyRef: {name: c, key: region}}
          - name: TOKEN
            valueFrom: {secretKeyRef: {name: wandb, key: api-key}}
        """,
        extra="  elasticPolicy: {rdzvBackend: c10d}\n",
    ).replace("          containers:\n", "          initContainers: [{name: init, image: busybox}]\n"
                                        "          containers:\n            - {name: logger, image: fluentbit}\n", 1)
    c = convert(text)
    by_field = warned(c)
    pod = "spec.pytorchReplicaSpecs.Master.template.spec"
    assert "spec.elasticPolicy" in by_field
    assert f"{pod}.initContainers" in by_field
    assert by_field[f"{pod}.containers[0]"]["message"] == "container 'logger' is not run: only 'pytorch' is"
    assert "secretKeyRef {name, key} only" in by_field[f"{pod}.containers[1].env[0].valueFrom"]["message"]
    assert f"{pod}.containers[1].env[1].valueFrom" not in by_field  # a Secret's key: the team's secret NAME.KEY
    assert c.env_vars == {} and c.spec.secrets == {"TOKEN": "wandb.api-key"}
    assert c.spec.command == ["python", "train.py"]  # the container named pytorch, not the first


def test_a_worker_unlike_the_master_runs_like_the_master_with_a_warning():
    c = convert(manifest("args: [--lr, '0.1']\n", worker="args: [--lr, '0.2']\nresources: {limits: {cpu: 4}}\n"))
    assert c.spec.command == ["python", "train.py", "--lr", "0.1"] and c.spec.replicas == 2
    container = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]"
    by_field = warned(c)
    assert "every replica runs like the Master" in by_field[f"{container}.command"]["message"]
    assert "Master's resources" in by_field[f"{container}.resources"]["message"]


def test_a_command_starting_torchrun_is_flagged():
    c = convert(manifest("").replace("[python, train.py]", "[torchrun, --nproc-per-node=2, train.py]"))
    (w,) = c.warnings
    assert "run the script directly" in w["message"]


# -- what is refused ------------------------------------------------------------------


def test_no_master_is_named_at_the_replica_specs_line():
    errs = errors_of(manifest("").replace("    Master:", "    Worker:"))
    assert [(e["field"], e["line"]) for e in errs] == [("spec.pytorchReplicaSpecs.Master", 6)]


def test_replicas_must_be_a_whole_number_and_one_master():
    errs = errors_of(manifest("", worker="\n").replace("replicas: 1", "replicas: two", 1))
    assert errs[0]["field"] == "spec.pytorchReplicaSpecs.Master.replicas" and errs[0]["line"] == 8
    assert "whole number" in errs[0]["message"]
    errs = errors_of(manifest("").replace("replicas: 1", "replicas: 2"))
    assert "exactly 1 Master" in errs[0]["message"]


def test_no_container_and_no_command_are_named():
    errs = errors_of(manifest("").replace("          containers:\n", "          containers: []\n          x:\n"))
    assert errs[0]["field"] == "spec.pytorchReplicaSpecs.Master.template.spec.containers"
    assert errs[0]["line"] == 11
    errs = errors_of(manifest("").replace("              command: [python, train.py]\n", "              args: [x]\n"))
    assert errs[0]["field"] == "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command"
    assert "entrypoint" in errs[0]["message"]


def test_bad_quantities_are_named_where_they_were_written():
    errs = errors_of(manifest("resources: {limits: {memory: 4Gx}}\n"))
    assert errs[0]["field"] == "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.memory"
    assert errs[0]["line"] == 14 and "unknown unit 'Gx'" in errs[0]["message"]
    errs = errors_of(manifest("", extra="  runPolicy: {backoffLimit: -1}\n"))
    assert (errs[0]["field"], errs[0]["line"]) == ("spec.runPolicy.backoffLimit", 6)


def test_job_spec_rules_are_reported_where_the_manifest_set_the_field():
    errs = errors_of(manifest("").replace("  name: t\n", "  name: -bad-\n"))
    assert (errs[0]["field"], errs[0]["line"]) == ("metadata.name", 4)
    assert "letters, digits" in errs[0]["message"]


def test_bad_yaml_and_missing_name_are_refused():
    assert errors_of("kind: PyTorchJob\nspec: [unclosed\n")[0]["message"].startswith("not valid YAML")
    errs = errors_of(manifest("").replace("  name: t\n", "  labels: {a: b}\n"))
    assert (errs[0]["field"], errs[0]["line"]) == ("metadata.name", 3)


# -- through the loader -----------------------------------------------------------------


def test_load_job_reads_a_manifest_and_logs_its_warnings(tmp_path, caplog):
    path = tmp_path / "pytorchjob.yaml"
    path.write_text(MNIST)
    with caplog.at_level(logging.WARNING, logger="trainyard.spec.kubeflow"):
        spec = load_job(path)
    assert spec.replicas == 4 and spec.command[-1] == "--epochs=1"
    assert f"{path}:32 spec.pytorchReplicaSpecs.Master.template.spec.volumes" in caplog.text


def test_load_job_keeps_line_numbers_for_a_broken_manifest(tmp_path):
    path = tmp_path / "pytorchjob.yaml"
    path.write_text(MNIST.replace("replicas: 3", "replicas: many"))
    with pytest.raises(InvalidSpec) as exc:
        load_job(path)
    assert exc.value.errors[0]["where"] == f"{path}:35 spec.pytorchReplicaSpecs.Worker.replicas"


def test_each_replica_keeps_its_own_image():
    c = convert(manifest("image: reg/master:1\n", worker="image: reg/worker:2\n"))
    assert (c.spec.image, c.spec.worker_image) == ("reg/master:1", "reg/worker:2")
    assert [c.spec.image_of(r) for r in range(c.spec.replicas)] == ["reg/master:1", "reg/worker:2"]
    assert not any("Master's image" in w["message"] for w in c.warnings)
    same = convert(manifest("image: reg/one:1\n", worker="image: reg/one:1\n"))
    assert same.spec.worker_image is None and same.spec.image_of(1) == "reg/one:1"


def test_a_worker_image_without_a_master_image_is_named():
    errs = errors_of(manifest("", worker="image: reg/worker:2\n"))
    assert errs[0]["field"] == "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].image"
    assert "Master needs one too" in errs[0]["message"]
    with pytest.raises(ValueError, match="worker_image needs an image"):
        JobSpec(command="x", worker_image="reg/worker:2")


def test_load_job_refuses_params_on_a_manifest_naming_each(tmp_path):
    path = tmp_path / "pytorchjob.yaml"
    path.write_text(MNIST)
    with pytest.raises(InvalidSpec) as exc:
        load_job(path, {"epochs": 1, "lr": 0.1})
    assert [e["field"] for e in exc.value.errors] == ["params.epochs", "params.lr"]
    assert "takes no params" in exc.value.errors[0]["message"]
