"""A step input from another step's output: a path after the reference is taken inside that output only."""

import pytest

from trainyard.services.pipeline_io import MissingInput, resolve_input
from trainyard.spec.pipeline_records import PipelineArtifact

ART = PipelineArtifact(id="a1", digest="sha256:d", run_id="r", step="a", job_id="j-a", attempt=1, output="o",
                       url="file:///store/jobs/j-a/1/outputs/o", size=1, files=1, created_at=0)


def resolve(subpath: str) -> dict:
    ref = {"kind": "step", "step": "a", "output": "o", "subpath": subpath, "from": ["a"], "fan_in": False}
    return resolve_input(None, "r", "b", "x", ref, {"a": {"o": "a1"}}, {"a1": ART}, lambda job_id: [])


def test_a_path_inside_the_output_is_appended_to_its_url():
    assert resolve("/shard/0")["url"] == ART.url + "/shard/0"
    assert resolve("")["url"] == ART.url


@pytest.mark.parametrize("subpath", ["/../../../j-other/1/outputs/secret.txt", "/a/..", "//etc", "/a\\b", "x"])
def test_a_stored_path_that_leaves_the_output_fails_the_input_before_it_is_appended(subpath):
    # runs stored before the spec refused these: the runner must not read another job's artifacts for them
    with pytest.raises(MissingInput, match=r"input 'x': the path .* inside step output 'o' must"):
        resolve(subpath)


def test_a_folder_input_is_walked_only_up_to_the_cap(tmp_path, monkeypatch):
    # the walk runs in the request: naming / must cost what a small folder does
    import os

    from trainyard.services import pipeline_io

    for d in range(30):
        (tmp_path / f"d{d:02}").mkdir()
        for f in range(10):
            (tmp_path / f"d{d:02}" / f"f{f}").write_text("x")
    opened = []
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p=".": opened.append(str(p)) or scandir(p))
    monkeypatch.setattr(pipeline_io, "FINGERPRINT_ENTRIES", 45)

    first = pipeline_io.fingerprint(str(tmp_path))

    assert len(opened) <= 3, opened  # the top (30 entries) and d00 (10); d01 gets the 5 left
    assert pipeline_io.fingerprint(str(tmp_path)) == first
    (tmp_path / "d00" / "f0").write_text("changed")
    assert pipeline_io.fingerprint(str(tmp_path)) != first
