"""Launcher reports against a real server and real launchers: only an attempt's own
launchers may report, only while it runs, and no output path or link leads out of the job."""

from __future__ import annotations

import json
import stat

import httpx
import pytest

from tests.e2e.helpers import py_job, until

pytestmark = pytest.mark.slow

FORGED = {"phase": "exited", "pid": 1, "log": {"offset": 0, "data": "forged\n"},
          "metrics": {"offset": 0, "lines": ['{"step": 9, "ts": 1, "values": {"loss": 9.0}}']},
          "result": {"exit_code": 1, "reason": "Error(exit 1)", "message": "forged",
                     "outputs": [{"path": "stolen.bin", "size": 1, "digest": "sha256:00"}]}}


def held_job(tmp_path) -> tuple[dict, object]:
    """A job that runs until the returned flag file is created, then prints 'done'."""
    flag = tmp_path / "flag"
    code = f"import pathlib, time\nwhile not pathlib.Path({str(flag)!r}).exists(): time.sleep(0.05)\nprint('done')"
    return py_job(code), flag


def replica_dir(srv, attempt_id: str, replica: int = 0):
    return srv.home / "attempts" / attempt_id / f"r{replica}"


def post_report(srv, attempt_id: str, body: dict, token: str | None = None, replica: int = 0) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{srv.url}/internal/attempts/{attempt_id}/replicas/{replica}/report", json=body,
                      headers=headers, timeout=10)


def seen(job) -> tuple:
    """What a report could change: status, logs, metrics and outputs."""
    info = job.refresh()
    return (info.status.value, [a.reason for a in info.attempts], job.logs(),
            [(m.name, m.value) for m in job.metrics()], [(a.path, a.digest) for a in job.outputs()])


def test_only_the_attempts_own_credential_is_accepted(server, tmp_path):
    c = server.client()
    spec, flag = held_job(tmp_path)
    job, other = c.submit(spec), c.submit(py_job("print('other')"))
    until(lambda: job.refresh().status.value == "running")
    attempt = f"{job.id}-1"
    config = json.loads((replica_dir(server, attempt) / "launch.json").read_text())
    other.wait(timeout=60)
    other_token = json.loads((replica_dir(server, f"{other.id}-1") / "launch.json").read_text())["token"]
    before = seen(job)

    for token in (None, "not-the-token", other_token):
        r = post_report(server, attempt, FORGED, token)
        assert r.status_code == 401 and r.json()["code"] == "attempt_unauthorized", r.text

    assert seen(job) == before
    assert config["token"] and config["token"] != other_token
    assert stat.S_IMODE((replica_dir(server, attempt) / "launch.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(replica_dir(server, attempt).stat().st_mode) == 0o700
    flag.touch()
    info = job.wait(timeout=60)
    assert info.status.value == "succeeded" and job.logs() == "done\n" and job.outputs() == []


def test_an_ended_or_unknown_attempt_takes_no_reports_and_keeps_its_outputs(server):
    c = server.client()
    job = c.submit(py_job("import trainyard; (trainyard.output_dir() / 'model.bin').write_bytes(b'm'); "
                          "trainyard.log_metrics(step=1, loss=0.5); print('done')"))
    assert job.wait(timeout=60).status.value == "succeeded"
    attempt = f"{job.id}-1"
    token = json.loads((replica_dir(server, attempt) / "launch.json").read_text())["token"]
    before = seen(job)

    ended = post_report(server, attempt, FORGED, token)
    unknown = post_report(server, f"{job.id}-7", FORGED, token)

    assert ended.status_code == 410 and ended.json()["code"] == "attempt_ended", ended.text
    assert unknown.status_code == 410, unknown.text
    assert seen(job) == before
    assert [a.path for a in job.outputs()] == ["model.bin"]


def test_output_paths_that_climb_out_are_refused_when_reported_and_when_asked_for(server, tmp_path):
    c = server.client()
    spec, flag = held_job(tmp_path)
    job = c.submit(spec)
    until(lambda: job.refresh().status.value == "running")
    attempt = f"{job.id}-1"
    token = json.loads((replica_dir(server, attempt) / "launch.json").read_text())["token"]
    climbing = {**FORGED["result"], "outputs": [{"path": "../../../../etc/hostname", "size": 1, "digest": "sha256:0"}]}

    r = post_report(server, attempt, {"phase": "exited", "pid": 1, "result": climbing}, token)
    asked = httpx.get(f"{server.url}/api/v1/jobs/{job.id}/outputs/..%2F..%2F..%2F..%2Fetc%2Fhostname",
                      headers=server.headers, timeout=10)

    assert r.status_code == 422, r.text
    assert r.json()["details"]["errors"][0]["field"] == "result.outputs[0].path"
    assert asked.status_code == 422 and asked.json()["details"]["errors"][0]["field"] == "path", asked.text
    assert job.refresh().status.value == "running" and job.outputs() == []
    flag.touch()
    assert job.wait(timeout=60).status.value == "succeeded"


def test_links_in_the_outputs_are_not_followed_out_of_the_job(server, tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "hostname").write_text("the host's own file")
    code = f"""
import os, trainyard
out = trainyard.output_dir()
(out / 'model.bin').write_bytes(b'm')
os.symlink({str(host / 'hostname')!r}, out / 'hostname')
os.symlink({str(host)!r}, out / 'etc')
os.symlink('model.bin', out / 'alias')
"""
    job = server.client().submit(py_job(code))

    assert job.wait(timeout=60).status.value == "succeeded"

    assert sorted(a.path for a in job.outputs()) == ["alias", "model.bin"]
    logs = job.logs()
    assert "output 'hostname' skipped" in logs and "output 'etc' skipped" in logs
