"""Artifact paths: relative, normal, and inside their folder, or refused."""

from __future__ import annotations

import pytest

from trainyard.artifact_paths import check_artifact_path, output_record_problem
from trainyard.artifacts.store import ArtifactStore


@pytest.mark.parametrize("path", ["model.bin", "sub/metrics.json", "replica-1/a b/ünïcode", "..hidden", "a..b"])
def test_safe_paths_pass_as_they_are(path):
    assert check_artifact_path(path) == path


@pytest.mark.parametrize("path", ["", "/etc/hostname", "../x", "a/../../x", "a//b", "a/", "./a", "a/./b",
                                  "a\\..\\b", "a\x00b", None, 3])
def test_unsafe_paths_are_refused(path):
    with pytest.raises(ValueError):
        check_artifact_path(path)


def test_an_output_record_names_its_bad_field():
    assert output_record_problem({"path": "a", "size": 1, "digest": "sha256:0"}) is None
    assert output_record_problem({"path": "../a", "size": 1, "digest": "sha256:0"})[0] == "path"
    assert output_record_problem({"path": "a", "size": "1", "digest": "sha256:0"})[0] == "size"
    assert output_record_problem({"path": "a", "size": 1})[0] == "digest"


def test_the_artifact_store_opens_only_its_own_files(tmp_path):
    store = ArtifactStore(f"file://{tmp_path / 'artifacts'}")
    inside = store.outputs_url("j-1", 1) + "/model.bin"
    assert store.confined(inside) == inside
    for url in (store.outputs_url("j-1", 1) + "/../../../../../etc/hostname", "file:///etc/hostname"):
        with pytest.raises(ValueError):
            store.open(url)
