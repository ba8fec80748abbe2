"""What the SDK resolves in a spec before it is sent: local paths against the spec's folder."""

import pytest

from trainyard import errors
from trainyard.sdk.prepare import prepare
from trainyard.spec.job import JobSpec


def test_a_spec_with_nothing_local_goes_as_it_is(tmp_path):
    spec = JobSpec.model_validate({"command": ["python", "-c", "pass"], "inputs": {"data": "s3://bucket/x"}})
    sent, blob, digest = prepare(spec, tmp_path)
    assert sent is spec and blob is None and digest is None


def test_local_inputs_are_resolved_and_checked(tmp_path):
    (tmp_path / "data.csv").write_text("a\n")
    spec = JobSpec.model_validate({"command": "x", "inputs": {"data": "data.csv", "remote": "s3://b/y"}})
    sent, _, _ = prepare(spec, tmp_path)
    assert sent.inputs == {"data": str(tmp_path / "data.csv"), "remote": "s3://b/y"}
    with pytest.raises(errors.InvalidSpec) as e:
        prepare(JobSpec.model_validate({"command": "x", "inputs": {"gone": "nope.csv"}}), tmp_path)
    assert e.value.errors[0]["field"] == "inputs.gone"
