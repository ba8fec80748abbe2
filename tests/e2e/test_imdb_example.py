"""examples/imdb: trainyard loads and runs pipeline.yaml, and its scripts make an averaged model that wins.

Named for what they go through: ``test_trainyard*`` and ``test_the_pipeline_runs_through_trainyard``
use trainyard (its loader; a real server); ``test_yaml_alone_*`` read the file only;
``test_scripts_without_trainyard_*`` run the four scripts as plain processes through
``run_local.py`` (each step's command from pipeline.yaml, paths filled in as the runner does),
to check the model code quickly and in detail.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import need_module

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "imdb"
PLACEHOLDER = re.compile(r"\{\{\s*([^}]*?)\s*\}\}")


def placeholders(value) -> list[str]:
    """Every ``{{…}}`` inside a step (strings, lists and mappings, at any depth)."""
    if isinstance(value, str):
        return PLACEHOLDER.findall(value)
    if isinstance(value, dict):
        return [p for v in value.values() for p in placeholders(v)]
    if isinstance(value, list):
        return [p for v in value for p in placeholders(v)]
    return []


# -- the file, without the runner -----------------------------------------------------------

@pytest.fixture(scope="module")
def pipeline() -> dict:
    return yaml.safe_load((EXAMPLE / "pipeline.yaml").read_text(encoding="utf-8"))


def test_trainyards_loader_accepts_the_pipeline_and_expands_it_as_the_readme_runs_it():
    from trainyard.spec.pipeline_file import load_pipeline
    from trainyard.spec.pipeline_graph import build

    loaded = load_pipeline(EXAMPLE / "pipeline.yaml", {"workers": 3, "epochs": 1, "batch": 50})
    graph = {i.name: i for i in build(loaded.spec, loaded.params).instances}
    assert sorted(graph) == ["aggregator", "copier", "evaluate", "train-0", "train-1", "train-2"]
    assert all(graph[f"train-{i}"].needs == ["copier"] for i in range(3))  # -p workers=3 makes 3 trainers
    assert sorted(graph["aggregator"].needs) == ["copier", "train-0", "train-1", "train-2"]  # + the vocabulary
    assert "aggregator" in graph["evaluate"].needs


def test_yaml_alone_every_reference_names_something_declared(pipeline):
    steps, params = pipeline["steps"], pipeline["params"]
    done: set[str] = set()
    for name, step in steps.items():
        inputs, outputs = step.get("inputs") or {}, step.get("outputs") or []
        command_refs = placeholders(step["command"])
        for ref in placeholders(step):
            kind, _, rest = ref.partition(".")
            if kind == "params":
                assert rest in params, f"{name}: {{{{{ref}}}}} is not a pipeline param"
            elif kind == "steps":
                other, word, output = rest.split(".")
                assert word == "outputs" and other in steps, f"{name}: {{{{{ref}}}}} names no step"
                assert output in (steps[other].get("outputs") or []), f"{name}: {other} has no output {output}"
                assert other in done, f"{name} uses {other}, which does not come before it (a cycle?)"
            elif kind in ("item", "index"):
                assert "foreach" in step, f"{name}: {{{{{ref}}}}} outside a foreach step"
            else:
                assert kind in ("inputs", "outputs"), f"{name}: unknown placeholder {{{{{ref}}}}}"
        for ref in command_refs:
            kind, _, key = ref.partition(".")
            if kind == "inputs":
                assert key in inputs, f"{name}: the command uses undeclared input {key}"
            if kind == "outputs":
                assert key in outputs, f"{name}: the command uses undeclared output {key}"
        # a declared output the command never gets a path for could never be written
        assert {f"outputs.{o}" for o in outputs} <= set(command_refs), name
        assert {f"inputs.{i}" for i in inputs} <= set(command_refs), name
        done.add(name)


def test_yaml_alone_every_command_runs_a_script_here_with_flags_it_accepts(pipeline):
    for name, step in pipeline["steps"].items():
        words = step["command"].split()
        assert words[0] == "python", name
        script = EXAMPLE / step.get("workdir", ".") / words[1]
        assert script.is_file(), f"{name}: {script} is missing"
        source = script.read_text(encoding="utf-8")
        for flag in (w for w in words if w.startswith("--")):
            assert f'"{flag}"' in source, f"{name}: {script.name} has no {flag} option"


# -- the steps, for real ----------------------------------------------------------------------

def run(*args: str | Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *map(str, args)], cwd=EXAMPLE, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> tuple[Path, str]:
    need_module("torch", "pip install 'trainyard[torch]'")
    out = tmp_path_factory.mktemp("imdb")
    done = run("run_local.py", "--out", out, "-p", "workers=5", "-p", "epochs=3", "-p", "batch=100")
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout + done.stderr


@pytest.mark.slow
def test_scripts_without_trainyard_the_averaged_model_beats_shard_zeros_model(local_run):
    out, log = local_run
    report = json.loads((out / "evaluate" / "report").read_text())
    assert report["averaged_accuracy"] > report["single_accuracy"], log
    assert report["averaged_accuracy"] > 0.85 and report["heldout_reviews"] == 2000
    assert report["averaged_from"] == ["0", "1", "2", "3", "4"]
    assert report["baseline"] == "0" and list(report["single_accuracies"]) == ["0", "1", "2", "3", "4"]
    assert report["single_accuracies"]["0"] == report["single_accuracy"]
    assert report["best_single_accuracy"] == max(report["single_accuracies"].values())
    assert "averaged model (5 shards): accuracy" in log and "single shard model (0):" in log
    assert "SYNTHETIC stand-in, not IMDB" in log
    assert "averaged_accuracy=" in log and "step=3 loss=" in log  # metrics, printed outside trainyard


@pytest.mark.slow
def test_scripts_without_trainyard_the_outputs_have_the_expected_shape(local_run):
    import numpy as np

    out, _ = local_run
    vocab = json.loads((out / "copier" / "vocab").read_text())
    shard_dirs = sorted((out / "copier" / "shards").iterdir())
    assert [d.name for d in shard_dirs] == ["0", "1", "2", "3", "4"]
    sizes = []
    for d in [*shard_dirs, out / "copier" / "heldout"]:
        assert sorted(p.name for p in d.iterdir()) == ["ids.npy", "labels.npy", "meta.json", "offsets.npy"]
        meta = json.loads((d / "meta.json").read_text())
        ids, offsets, labels = (np.load(d / f"{n}.npy") for n in ("ids", "offsets", "labels"))
        assert meta["vocab_size"] == len(vocab) and meta["reviews"] == len(labels) == len(offsets)
        assert ids.max() < len(vocab) and set(labels.tolist()) == {0, 1}
        sizes.append(len(labels))
    assert sizes == [1000] * 5 + [2000]
    assert sorted(p.name for p in (out / "train" / "model").iterdir()) == ["0", "1", "2", "3", "4"]
    assert (out / "aggregator" / "model").is_file()


@pytest.mark.slow
def test_scripts_without_trainyard_the_aggregate_is_the_mean_of_models_sharing_initial_weights(local_run):
    import torch

    out, _ = local_run
    models = [torch.load(out / "train" / "model" / str(i), weights_only=True) for i in range(5)]
    averaged = torch.load(out / "aggregator" / "model", weights_only=True)
    assert len({m["init_digest"] for m in models}) == 1
    assert averaged["init_digest"] == models[0]["init_digest"]
    for key, value in averaged["state_dict"].items():
        mean = torch.stack([m["state_dict"][key] for m in models]).mean(0)  # shards are equal in size
        assert torch.allclose(value, mean, atol=1e-6), key
        assert not torch.allclose(value, models[0]["state_dict"][key]), key


@pytest.mark.slow
def test_scripts_without_trainyard_the_aggregator_refuses_models_from_other_initial_weights(local_run, tmp_path):
    out, _ = local_run
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(out / "train" / "model" / "0", models / "0")
    trained = run("trainer.py", "--data", out / "copier" / "shards" / "1", "--seed", "7", "--out", models / "1")
    assert trained.returncode == 0, trained.stderr

    refused = run("aggregator.py", "--models", models, "--out", tmp_path / "avg")
    assert refused.returncode != 0
    assert "model 1 started from other initial weights" in refused.stderr
    assert not (tmp_path / "avg").exists()


@pytest.mark.slow
def test_the_pipeline_runs_through_trainyard(server, tmp_path):
    r = server.cli("pipeline", "run", str(EXAMPLE / "pipeline.yaml"), "-p", "workers=5", "-p", "epochs=3",
                   "-p", "batch=100", "--follow", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stderr.split("started ", 1)[1].split()[0]
    client = server.client()
    steps = {s.name: s for s in client.pipelines.get(run_id).steps}
    assert sorted(steps) == ["aggregator", "copier", "evaluate", *(f"train-{i}" for i in range(5))]
    assert {s.status for s in steps.values()} == {"succeeded"}
    report = json.loads(client.pipelines.download(steps["evaluate"].artifacts["report"], tmp_path / "report")
                        .read_text())
    assert report["averaged_accuracy"] > report["single_accuracy"]
    metrics = {m.name: m.value for m in client.metrics(steps["evaluate"].job_id)}
    assert metrics["averaged_accuracy"] == pytest.approx(report["averaged_accuracy"])
    assert "SYNTHETIC stand-in, not IMDB" in client.job(steps["copier"].job_id).logs()
    assert [m.step for m in client.metrics(steps["train-0"].job_id) if m.name == "loss"] == [1, 2, 3]
    shown = server.cli("pipeline", "logs", run_id, "evaluate")  # as the README reads the accuracies
    assert shown.returncode == 0 and "averaged model (5 shards): accuracy" in shown.stdout, shown.stderr
