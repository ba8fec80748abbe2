"""`trainyard server --config FILE`: what the file's settings become, and how a bad one is named."""

from __future__ import annotations

import pytest

from trainyard.cli.server_config import load
from trainyard.config import ServerSettings
from trainyard.errors import InvalidSpec


@pytest.mark.parametrize("text", ["sample_every: 0\n", "sample_every: 0.0\n", "sample_every: '0s'\n"])
def test_sample_every_zero_turns_sampling_off(tmp_path, text):
    path = tmp_path / "server.yaml"
    path.write_text(text)
    settings = load(path)
    assert settings == {"sample_every": 0.0}
    assert ServerSettings(**settings).sample_every == 0.0


def test_durations_are_read_with_units(tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text("sample_every: 2m\nidle_gpu_period: 1h\n")
    assert load(path) == {"sample_every": 120.0, "idle_gpu_period": 3600.0}


@pytest.mark.parametrize("text, field", [("sample_every: -1\n", "sample_every"),
                                         ("sample_every: soon\n", "sample_every"),
                                         ("sample_every: true\n", "sample_every"),
                                         ("idle_gpu_period: 0\n", "idle_gpu_period")])
def test_a_bad_duration_names_its_setting(tmp_path, text, field):
    path = tmp_path / "server.yaml"
    path.write_text(text)
    with pytest.raises(InvalidSpec) as e:
        load(path)
    assert [err["field"] for err in e.value.errors] == [field]
