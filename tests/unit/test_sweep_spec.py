"""The sweep spec: parameter forms, the trial job, and errors that name the field and the line."""

import pytest

from trainyard.errors import InvalidSpec
from trainyard.spec.loader import parse_model
from trainyard.spec.sweep import SweepSpec

SWEEP = """name: s
job:
  command: python train.py --lr {{params.lr}} --depth {{params.depth}} --seed {{params.seed}}
  params: {epochs: 3}
parameters:
  lr: {min: 0.0001, max: 0.1, log: true}
  depth: {values: [2, 4, 8]}
  layers: {min: 1, max: 4}
  seed: 7
metric: {name: val_acc}
"""


def errors_of(text: str) -> list[tuple[str, int | None]]:
    with pytest.raises(InvalidSpec) as e:
        parse_model(SweepSpec, text, "s.yaml")
    return [(x["field"], x["line"]) for x in e.value.errors]


def test_ranges_of_whole_numbers_stay_whole_and_constants_go_to_every_trial():
    s = parse_model(SweepSpec, SWEEP, "s.yaml")
    assert s.searched()["layers"].integer and not s.searched()["lr"].integer
    assert s.constants() == {"seed": 7} and s.max_trials == 10 and s.failures_allowed == 3
    job = s.trial_job(4, {"lr": 0.01, "depth": 4, "layers": 2})
    assert job.name == "s-4" and job.params == {"epochs": 3, "seed": 7, "lr": 0.01, "depth": 4, "layers": 2}
    assert job.argv()[-1] == "python train.py --lr 0.01 --depth 4 --seed 7"
    # the values the job was checked with are not kept as its own params
    assert s.job.params == {"epochs": 3}
    assert SweepSpec.model_validate(s.model_dump(mode="json")) == s
    # a trial is labelled with its sweep and number beside the job's own labels
    text = SWEEP.replace("  params: {epochs: 3}\n", "  params: {epochs: 3}\n  labels: {exp: a}\n")
    labelled = parse_model(SweepSpec, text, "s.yaml").trial_job(4, {"lr": 0.01, "depth": 4, "layers": 2}, "s-1a2b")
    assert labelled.labels == {"exp": "a", "trainyard.io/sweep": "s-1a2b", "trainyard.io/trial": "4"}


def test_a_sweeps_job_leaves_room_for_the_trials_own_labels():
    many = "{" + ", ".join(f"k{i}: v" for i in range(31)) + "}"
    assert errors_of(SWEEP.replace("  params: {epochs: 3}\n", f"  params: {{epochs: 3}}\n  labels: {many}\n")) == [
        ("job", 2)]


def test_a_grid_is_every_combination_of_values_in_order():
    s = parse_model(SweepSpec, SWEEP.replace("  lr: {min: 0.0001, max: 0.1, log: true}\n", "  lr: {values: [0.1, 0.01]}\n")
                    .replace("  layers: {min: 1, max: 4}\n", "") + "method: grid\n", "s.yaml")
    assert s.grid() == [{"lr": 0.1, "depth": 2}, {"lr": 0.1, "depth": 4}, {"lr": 0.1, "depth": 8},
                        {"lr": 0.01, "depth": 2}, {"lr": 0.01, "depth": 4}, {"lr": 0.01, "depth": 8}]
    assert s.max_trials == 6


@pytest.mark.parametrize("old, new, error", [
    ("log: true}", "log: true, values: [1]}", ("parameters.lr", 6)),
    ("min: 0.0001", "min: -1", ("parameters.lr", 6)),
    ("{values: [2, 4, 8]}", "{min: 3}", ("parameters.depth", 7)),
    ("{values: [2, 4, 8]}", "{values: []}", ("parameters.depth", 7)),
    ("{min: 1, max: 4}", "{min: 1, max: .inf}", ("parameters.layers", 8)),
    ("{name: val_acc}", "{name: val_acc, goal: up}", ("metric.goal", 10)),
    ("--seed {{params.seed}}", "--seed {{params.nope}}", ("job", 2)),
    ("metric: {name: val_acc}\n", "metric: {name: val_acc}\ntrials: 100000\n", ("trials", 11)),
    ("metric: {name: val_acc}\n", "metric: {name: val_acc}\nmethod: grid\n", ("", 1)),
    ("  seed: 7\n", "  seed: .nan\n", ("parameters", 5)),
    ("metric: {name: val_acc}\n", "metric: {name: val_acc}\nearly_stopping: {type: asha}\n",
     ("early_stopping.type", 11)),
    # Optuna's Hyperband makes no bracket and its median rule waits for min_trials ended: neither stopped any trial
    ("metric: {name: val_acc}\n", "metric: {name: val_acc}\nearly_stopping: {type: hyperband, min_steps: 50, "
     "max_steps: 20}\n", ("early_stopping.max_steps", 11)),
    ("metric: {name: val_acc}\n", "metric: {name: val_acc}\ntrials: 4\n"
     "early_stopping: {type: median, min_trials: 4}\n", ("early_stopping", 12)),
    # a setting of the other rule was ignored
    ("metric: {name: val_acc}\n", "metric: {name: val_acc}\nearly_stopping: {type: hyperband, warmup_steps: 5}\n",
     ("early_stopping.warmup_steps", 11)),
    ("metric: {name: val_acc}\n", "metric: {name: val_acc}\nearly_stopping: {type: median, max_steps: 20}\n",
     ("early_stopping.max_steps", 11)),
])
def test_every_bad_field_is_named_with_its_line(old, new, error):
    assert errors_of(SWEEP.replace(old, new)) == [error]


@pytest.mark.parametrize("layers, message", [
    ("{min: -1.0e+308, max: 1.0e+308}", "too large a span for a float"),
    ("{min: 0.0, max: 1.0, step: .inf}", "step must be a finite number"),
    ("{min: 0.0, max: 1.0e+300, step: 1.0e-300}", "at most 9,007,199,254,740,992"),
    ("{min: 0, max: 100000000000000000000}", "within ±9,007,199,254,740,992"),
])
def test_a_range_optuna_cannot_sample_is_refused_at_its_line(layers, message):
    with pytest.raises(InvalidSpec) as e:
        parse_model(SweepSpec, SWEEP.replace("{min: 1, max: 4}", layers), "s.yaml")
    assert [(x["field"], x["line"]) for x in e.value.errors] == [("parameters.layers", 8)]
    assert message in e.value.errors[0]["message"]


def test_wide_ranges_that_optuna_samples_still_pass():
    for layers in ("{min: 0, max: 4294967295}", "{min: 0.0, max: 1.0, step: 1.0e-15}",
                   "{min: -1.0e+307, max: 1.0e+307}", "{min: 1.0e-300, max: 1.0e+308, log: true}"):
        assert parse_model(SweepSpec, SWEEP.replace("{min: 1, max: 4}", layers), "s.yaml").searched()["layers"]


def test_a_sweep_searches_something():
    assert errors_of("job: {command: x}\nparameters: {seed: 7}\nmetric: {name: val_acc}\n") == [("parameters", 2)]


def test_a_sweep_stored_before_its_job_could_not_claim_trainyards_labels_still_loads():
    from trainyard.spec.submitted import STORED

    data = parse_model(SweepSpec, SWEEP, "s.yaml").model_dump(mode="json")
    data["job"]["labels"] = {"trainyard.io/sweep": "s-other"}
    with pytest.raises(ValueError, match="trainyard's own"):
        SweepSpec.model_validate(data)
    assert SweepSpec.model_validate(data, context=STORED).job.labels == {"trainyard.io/sweep": "s-other"}


def test_early_stopping_at_its_bounds_passes_and_a_whole_dump_of_it_is_taken_back():
    for rule in ("{type: hyperband, min_steps: 20, max_steps: 20}", "{type: median, min_trials: 3}",
                 "{type: median, warmup_steps: 0, min_trials: 1}"):
        s = parse_model(SweepSpec, SWEEP + f"trials: 4\nearly_stopping: {rule}\n", "s.yaml")
        # the SDK sends model_dump(): the other rule's defaults in it are no error
        assert SweepSpec.model_validate(s.model_dump(mode="json")) == s


def test_a_sweep_stored_with_early_stopping_since_refused_still_loads():
    from trainyard.spec.submitted import STORED

    data = parse_model(SweepSpec, SWEEP, "s.yaml").model_dump(mode="json")
    data["early_stopping"] = {"type": "hyperband", "min_steps": 50, "max_steps": 20, "warmup_steps": 3}
    assert SweepSpec.model_validate(data, context=STORED).early_stopping.max_steps == 20
