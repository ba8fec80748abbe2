"""A job whose command or environment one ``execve`` cannot take is refused at submit, naming the field (it passed,
and its attempt failed at launch with "Argument list too long"); one right at Linux's limit runs."""

from __future__ import annotations

import httpx
import pytest

from trainyard.spec.exec_size import MAX_ARG_STRLEN

pytestmark = pytest.mark.slow

BIG = "x" * MAX_ARG_STRLEN  # with its NUL, one byte past what one argument or NAME=value may be


@pytest.mark.parametrize("spec, field", [
    ({"command": "true", "env_vars": {"BIG": BIG[:-1]}}, "env_vars.BIG"),  # BIG=… and its NUL: 131,076 bytes
    ({"command": ["echo", BIG]}, "command[1]"),
    ({"command": "echo {{params.p}} {{params.p}}", "params": {"p": "y" * 100_000}}, "command"),  # twice: 200 kB
    ({"command": ["cat", "{{params.p}}"], "params": {"p": BIG}}, "command[1]"),
    ({"command": "true", "env_vars": {f"V{i}": "y" * 100_000 for i in range(25)}}, ""),  # 2.5 MB: past ARG_MAX
], ids=["an env var", "an argument", "a param in a string command", "a param in an argv", "the whole"])
def test_a_command_or_environment_past_what_execve_takes_is_refused_naming_the_field(server, spec, field):
    r = httpx.post(server.url + "/api/v1/jobs", json={"spec": spec}, headers=server.headers, timeout=30)
    assert r.status_code == 422, r.text
    errors = r.json()["details"]["errors"]
    assert errors[0]["field"] == field and "Linux" in errors[0]["message"], errors
    assert server.client().jobs(limit=10).items == []


def test_the_cli_names_the_field_and_one_at_the_limit_runs(server, tmp_path):
    # given a spec whose variable is one byte too long for execve
    job = tmp_path / "job.yaml"
    job.write_text(f"command: echo ${{#BIG}}\nenv_vars:\n  BIG: {'b' * (MAX_ARG_STRLEN - 4)}\n")
    # then the CLI refuses it, naming it, and nothing is submitted
    r = server.cli("run", str(job))
    assert r.returncode == 2 and "env_vars.BIG" in r.stderr + r.stdout and "MAX_ARG_STRLEN" in r.stderr + r.stdout, r
    assert server.client().jobs(limit=10).items == []
    # and one byte shorter (BIG=, the value and its NUL: 131,072 bytes), it runs and sees all of it
    job.write_text(f"command: echo ${{#BIG}}\nenv_vars:\n  BIG: {'b' * (MAX_ARG_STRLEN - 5)}\n")
    r = server.cli("run", str(job), "--wait")
    assert r.returncode == 0, r
    jid = server.client().jobs(limit=10).items[0].id
    assert server.cli("logs", jid).stdout.strip() == str(MAX_ARG_STRLEN - 5)


def test_secrets_the_launcher_adds_count_and_what_fits_with_them_runs(server):
    http = httpx.Client(base_url=server.url, headers=server.headers, timeout=60)
    # given ten secrets of 64 KiB, and ten of 20,000 characters, each starting with a word no error may show
    for i in range(10):
        assert http.put(f"/api/v1/secrets/big{i}", json={"value": "TOPSECRET" + "s" * (65536 - 9)}).status_code == 200
        assert http.put(f"/api/v1/secrets/mid{i}", json={"value": "TOPSECRET" + "m" * (20000 - 9)}).status_code == 200
    env = {f"V{i}": "y" * 100_000 for i in range(12)}  # 1.2 MB: the spec alone fits
    # when a job's env_vars and the big ones are past ARG_MAX together (1.86 MB; less what trainyard adds: 1.5 MiB)
    r = http.post("/api/v1/jobs", json={"spec": {"command": "true", "env_vars": env,
                                                 "secrets": {f"S{i}": f"big{i}" for i in range(10)}}})
    # then it is refused at submit, naming secrets, showing no value, and nothing is submitted
    assert r.status_code == 422, r.text[:500]
    [error] = r.json()["details"]["errors"]
    assert error["field"] == "secrets" and "command, env_vars, params and secrets together" in error["message"]
    assert "Linux's ARG_MAX" in error["message"] and "TOPSECRET" not in r.text, error
    assert server.client().jobs(limit=10).items == []
    # and with the smaller ones (1.4 MB in all), it is taken, and runs with every one of them in its environment
    job = http.post("/api/v1/jobs", json={"spec": {"command": "echo ${#M0} ${#M9} ${#V11}", "env_vars": env,
                                                   "secrets": {f"M{i}": f"mid{i}" for i in range(10)}}})
    assert job.status_code == 201, job.text[:2000]
    done = http.get(f"/api/v1/jobs/{job.json()['id']}/wait", params={"timeout": 60}).json()
    assert done["status"] == "succeeded", done
    assert server.cli("logs", done["id"]).stdout.strip() == "20000 20000 100000"
