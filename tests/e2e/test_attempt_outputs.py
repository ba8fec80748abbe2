"""A job's outputs are its final attempt's: a retry that succeeds without writing any shows none, not the
failed attempt's; an earlier attempt's outputs are asked for by number."""

import httpx
import pytest

from tests.e2e.helpers import py_job

pytestmark = pytest.mark.slow

# attempt 1 writes partial.bin and fails; attempt 2 writes nothing and succeeds
_CODE = """
import os, sys, trainyard
if os.environ['TRAINYARD_ATTEMPT'] == '1':
    (trainyard.output_dir() / 'partial.bin').write_bytes(b'half a model')
    sys.exit(1)
"""


def test_a_succeeded_retry_that_wrote_nothing_has_no_outputs(server, tmp_path):
    job = server.client().submit(py_job(_CODE, retry={"max": 1, "backoff": 0}))
    info = job.wait(timeout=60)
    assert info.status.value == "succeeded" and len(info.attempts) == 2
    assert job.outputs() == []  # the failed attempt's half model is not the job's result
    [first] = server.client().outputs(job.id, attempt=1)
    assert (first.attempt, first.path) == (1, "partial.bin")
    dest = server.client().download(job.id, tmp_path / "dl", attempt=1)
    assert (dest / "partial.bin").read_bytes() == b"half a model"
    said = server.cli("download", job.id, "--to", str(tmp_path / "final"))
    assert said.returncode == 1 and f"{job.id} has no outputs from attempt 2" in said.stderr
    said = server.cli("download", job.id, "--attempt", "1", "--to", str(tmp_path / "one"))
    assert said.returncode == 0, said.stderr
    assert "attempt 1: 1 file(s), 12 bytes" in said.stdout and (tmp_path / "one" / "partial.bin").exists()


def test_an_attempt_is_asked_for_by_a_number_it_has_had(server):
    job = server.client().submit(py_job("pass"))
    job.wait(timeout=60)
    assert server.client().outputs_of(job.id) == (1, [])
    said = server.cli("download", job.id, "--attempt", "2")
    assert said.returncode == 1 and f"job {job.id} has no attempt 2 (it has had 1)" in said.stderr
    said = server.cli("download", job.id, "--attempt", "0")
    assert said.returncode == 2 and "--attempt" in said.stderr
    resp = httpx.get(f"{server.url}/api/v1/jobs/{job.id}/outputs", params={"attempt": "x"},
                     headers={"Authorization": f"Bearer {server.token}"})
    assert resp.status_code == 422 and "attempt" in resp.text
