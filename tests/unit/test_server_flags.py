"""`trainyard server`'s capacity flags and its config's numbers: a negative, zero, NaN, infinite or absurd one is
refused before the server starts, naming the flag or the file's setting, exit 2."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from trainyard.cli.main import app


@pytest.fixture
def started(monkeypatch, tmp_path):
    """The settings of each server the CLI would start (none starts: a flag taken is recorded, not served)."""
    served = []
    monkeypatch.setattr("trainyard.server.serve", served.append)
    monkeypatch.setenv("TRAINYARD_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return served


@pytest.mark.parametrize("flag, value, said", [
    ("--cpus", "-1", "-1: declare more than 0 cores"),
    ("--cpus", "0", "0: declare more than 0 cores"),
    ("--cpus", "nan", "a finite number"),
    ("--cpus", "inf", "a finite number"),
    ("--cpus", "1e12", "at most 1000000"),
    ("--memory", "-5Gi", "not a memory quantity"),
    ("--memory", "0", "declare more than 0"),
    ("--memory", "4096Pi", "at most 1024Pi"),
    ("--gpus", "-1", "declare 0 to 1024 GPUs"),
    ("--gpus", "100000000", "declare 0 to 1024 GPUs"),
    ("--gpu-type", "A 100", "a GPU type is 1 to 63 letters"),
    ("--gpu-type", "", "a GPU type is 1 to 63 letters"),
])
def test_a_capacity_flag_out_of_range_is_refused_naming_it(started, flag, value, said):
    got = CliRunner().invoke(app, ["server", flag, value])
    assert got.exit_code == 2 and started == [], got.output
    assert got.output.startswith(f"error: {flag}: ") and said in got.output, got.output
    assert len(got.output.strip().splitlines()) == 1, got.output


@pytest.mark.parametrize("flag, value, ray_says", [
    ("--cpus", "4", "ray start --num-cpus N"),
    ("--memory", "8Gi", "ray start --memory BYTES"),
    ("--gpus", "2", "ray start --num-gpus N"),
    ("--gpu-type", "A100", "ray start --resources"),
])
def test_a_capacity_flag_with_the_ray_engine_is_refused_naming_it_not_dropped(started, flag, value, ray_says):
    # Ray's nodes report their own resources: the declared capacity went nowhere, without a word
    got = CliRunner().invoke(app, ["server", "--engine", "ray", "--ray-address", "127.0.0.1:6379", flag, value])
    assert got.exit_code == 2 and started == [], got.output
    assert got.output.startswith(f"error: {flag}: not with --engine ray: Ray's nodes declare their own ("), got.output
    assert ray_says in got.output and len(got.output.strip().splitlines()) == 1, got.output


def test_capacity_that_makes_sense_is_declared(started):
    got = CliRunner().invoke(app, ["server", "--cpus", "0.5", "--memory", "8Gi", "--gpus", "0"])
    assert got.exit_code == 0, got.output
    got = CliRunner().invoke(app, ["server", "--gpus", "2", "--gpu-type", "A100"])
    assert got.exit_code == 0, got.output
    assert [(s.cpus, s.memory, s.gpus, s.gpu_type) for s in started] == [(0.5, 8 << 30, 0, None),
                                                                         (None, None, 2, "A100")]


def test_a_gpu_type_for_no_gpus_is_refused_naming_it_not_dropped(started, monkeypatch):
    # declared none: the node had no GPUs, and the type was dropped without a word
    got = CliRunner().invoke(app, ["server", "--gpus", "0", "--gpu-type", "A100"])
    assert got.exit_code == 2 and started == [], got.output
    assert got.output == ("error: --gpu-type: A100: --gpus 0 declares no GPUs, so none is of this type; declare how "
                          "many (--gpus N) or leave --gpu-type out\n"), got.output
    # none detected (no --gpus): the same
    monkeypatch.setattr("trainyard.engines.detect.detect_gpus", lambda: ([], None))
    got = CliRunner().invoke(app, ["server", "--gpu-type", "A100"])
    assert got.exit_code == 2 and started == [], got.output
    assert got.output.startswith("error: --gpu-type: A100: no GPU was detected on this machine"), got.output
    # while GPUs detected take the type given for them, as before
    monkeypatch.setattr("trainyard.engines.detect.detect_gpus", lambda: (["0", "1"], "A10G"))
    got = CliRunner().invoke(app, ["server", "--gpu-type", "A100"])
    assert got.exit_code == 0 and [s.gpu_type for s in started] == ["A100"], got.output


@pytest.mark.parametrize("text, field", [
    ("prices:\n  cpu_hour: .inf\n", "2 prices.cpu_hour"),
    ("prices:\n  memory_gib_hour: .nan\n", "2 prices.memory_gib_hour"),
    ("prices:\n  cpu_hour: 1e30\n", "2 prices.cpu_hour"),
    ("prices:\n  gpu_hour: {A100: .nan}\n", "2 prices.gpu_hour.A100"),
    ("prices:\n  gpu_hour: {A100: -1}\n", "1 prices"),
    ("idle_gpu_threshold: .nan\n", "1 idle_gpu_threshold"),
    ("webhooks:\n  chat: {url: 'http://a', timeout: .nan}\n", "2 webhooks.chat.timeout"),
])
def test_a_config_number_that_is_not_finite_or_is_absurd_is_refused_naming_its_setting(started, tmp_path, text,
                                                                                       field):
    (tmp_path / "server.yaml").write_text(text)
    got = CliRunner().invoke(app, ["server", "--config", "server.yaml"])
    assert got.exit_code == 2 and started == [], got.output
    assert got.output.startswith(f"error: invalid server config server.yaml:{field}: "), got.output


def test_the_declared_bounds_are_the_specs_own():
    # config sits below spec and cannot import its bounds: a node may declare what a job may ask for
    from trainyard import config
    from trainyard.spec.job import Resources
    from trainyard.spec.units import MAX_BYTES, MAX_CPU

    assert (config.MAX_CPUS, config.MAX_MEMORY) == (MAX_CPU, MAX_BYTES)
    for gpu_type in ["A100", "RTX-4090", "nvidia.com_h100", "A 100", "-A100", "x" * 64, "é"]:
        try:
            Resources.model_validate({"gpu": 1, "gpu_type": gpu_type})
            spec_takes = True
        except ValueError:
            spec_takes = False
        assert bool(config.GPU_TYPE.fullmatch(gpu_type)) == spec_takes, gpu_type
