"""A new user's first minutes, through the real `trainyard` command against a real server: a job from a
command line, snapshots that respect ignore files, errors that suggest the fix, doctor, init, ls."""

import json
import os
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

LIST_FILES = "import os; print(sorted(os.listdir('.')))"


def test_a_command_runs_and_its_dry_run_spec_round_trips_through_a_file(server, tmp_path):
    (tmp_path / "train.py").write_text("import sys; print('lr is', sys.argv[-1])\n")
    args = ["--memory", "512Mi", "--cpu", "500m", "-p", "lr=0.1", "--env", "MODE=fast", "--retries", "1",
            "--", "python", "train.py", "{{params.lr}}"]
    r = server.cli("run", "--follow", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "lr is 0.1" in r.stdout
    dry = server.cli("run", "--dry-run", *args, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "name: train" in dry.stdout and "memory: 512Mi" in dry.stdout and "workdir: ." in dry.stdout
    (tmp_path / "job.yaml").write_text(dry.stdout)
    again = server.cli("run", "--dry-run", "job.yaml", cwd=tmp_path)
    assert again.stdout == dry.stdout, again.stderr
    r = server.cli("run", str(tmp_path / "job.yaml"), "-p", "lr=0.5", "--follow")
    assert r.returncode == 0 and "lr is 0.5" in r.stdout, r.stderr
    ran = json.loads(server.cli("ls", "-o", "json").stdout)
    assert [j["spec"]["env_vars"] for j in ran] == [{"MODE": "fast"}] * 2
    assert [j["spec"]["retry"]["max"] for j in ran] == [1, 1]


def test_a_python_script_runs_with_its_arguments(server, tmp_path):
    (tmp_path / "hello.py").write_text("import sys; print('hello', *sys.argv[1:])\n")
    r = server.cli("run", "hello.py", "--follow", "--", "--to", "you", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "hello --to you" in r.stdout


def test_ignored_files_stay_out_of_the_snapshot(server, tmp_path):
    (tmp_path / "data").mkdir()
    with open(tmp_path / "data" / "big.bin", "wb") as f:
        f.truncate(100 * 2**20)  # 100 MB, sparse: were it packed, the warning below would show
    (tmp_path / ".gitignore").write_text("data/\n")
    (tmp_path / ".trainyardignore").write_text("*.ckpt\n")
    (tmp_path / "model.ckpt").write_bytes(b"x")
    (tmp_path / "train.py").write_text("print('code')\n")
    r = server.cli("run", "--follow", "--", "python", "-c", LIST_FILES, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "['.gitignore', '.trainyardignore', 'train.py']" in r.stdout
    assert "warning" not in r.stderr


def test_a_large_snapshot_names_its_largest_files_and_an_oversized_one_is_refused(server, tmp_path):
    (tmp_path / "weights.bin").write_bytes(os.urandom(3 * 2**20))
    (tmp_path / "train.py").write_text("print('ok')\n")
    r = server.cli("run", "--follow", "--", "python", "train.py", cwd=tmp_path,
                   env={"TRAINYARD_SNAPSHOT_WARN": "1Mi"})
    assert r.returncode == 0, r.stderr
    assert "warning:" in r.stderr and "weights.bin" in r.stderr and "leave out with: *.bin" in r.stderr
    r = server.cli("run", "--", "python", "train.py", cwd=tmp_path, env={"TRAINYARD_SNAPSHOT_MAX": "2Mi"})
    assert r.returncode == 2
    assert "over the limit of 2Mi" in r.stderr and "weights.bin" in r.stderr and "*.bin" in r.stderr
    assert len(json.loads(server.cli("ls", "-o", "json").stdout)) == 1


def test_misspellings_get_the_closest_name(server, tmp_path):
    typo = tmp_path / "job.yaml"
    typo.write_text("comand: echo hi\nresources: {gpus: 1}\n")
    r = server.cli("run", str(typo))
    assert r.returncode == 2
    assert f"{typo}:1 comand: unknown field 'comand'; did you mean 'command'?" in r.stderr
    assert f"{typo}:2 resources.gpus: unknown field 'gpus'; did you mean 'gpu'?" in r.stderr
    r = server.cli("rnu", "job.yaml")
    assert r.returncode == 2 and "Did you mean 'run'?" in r.stderr
    r = server.cli("run", "--gpu", "1", "--gpu-type", "a100", "--", "true")
    assert r.returncode == 2 and "have: A100" in r.stderr and "did you mean 'A100'?" in r.stderr  # as --queue's
    assert server.cli("queue", "create", "training").returncode == 0
    r = server.cli("run", "--queue", "trainig", "--", "true")
    assert r.returncode == 2 and "did you mean 'training'?" in r.stderr and "default, training" in r.stderr
    r = server.cli("ls", "--status", "runing")
    assert r.returncode == 2 and "did you mean 'running'?" in r.stderr
    script = tmp_path / "s.py"
    script.write_text("print(1)\n")
    assert "Traceback" not in r.stderr + server.cli("run", "--dry-run", str(script)).stderr


def test_version_and_job_id_completion(server):
    r = server.cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == "trainyard 0.1.0"
    job_id = server.cli("run", "--", "true").stdout.strip()
    r = server.cli(env={"_TRAINYARD_COMPLETE": "complete_bash", "COMP_WORDS": "trainyard show ", "COMP_CWORD": "2"})
    assert job_id in r.stdout.split(), r.stdout + r.stderr


def test_doctor_reports_an_unreachable_server_as_an_error_with_the_fix(server, tmp_path):
    ok = server.cli("doctor")
    assert ok.returncode == 0, ok.stdout
    said = " ".join(ok.stdout.split())  # the check column is as wide as the longest check's name
    assert f"ok server {server.url}" in said and "trainyard 0.1.0" in said
    assert "1 node(s), 2 cores, 4 GPU(s) (A100)" in ok.stdout
    key = server.home / "secrets.key"
    assert f"ok secrets no key yet: {key}" in said
    assert "ok accounts jobs may run as the accounts of users made with --os-user" in said
    key.write_text("not a key\n")
    key.chmod(0o644)
    bad = server.cli("doctor")
    assert bad.returncode == 1
    assert f"error secrets {key} is readable by others (mode 644)" in " ".join(bad.stdout.split())
    key.chmod(0o600)
    assert "holds a line that is not a Fernet key" in server.cli("doctor").stdout
    key.unlink()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    r = server.cli("doctor", env={"TRAINYARD_SERVER": f"http://127.0.0.1:{port}"})
    assert r.returncode == 1
    line = next(ln for ln in r.stdout.splitlines() if "server" in ln)
    assert line.startswith("error") and f"127.0.0.1:{port}" in line and "does not answer" in line
    assert "fix: start it with `trainyard server`" in r.stdout
    assert any(ln.startswith("ok      disk") or ln.startswith("warning disk") for ln in r.stdout.splitlines())
    none = server.cli("doctor", env={"TRAINYARD_SERVER": "", "TRAINYARD_HOME": str(tmp_path / "fresh")})
    assert none.returncode == 0, none.stdout  # nothing wrong: the first command starts a server
    assert "warning server no local server is running" in " ".join(none.stdout.split())
    assert "fix: one starts by itself" in none.stdout


def test_init_writes_a_spec_that_runs_as_it_is(server, tmp_path):
    (tmp_path / "train.py").write_text("if __name__ == '__main__':\n    print('trained from init')\n")
    r = server.cli("init", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "job.yaml").read_text()
    assert "command: [python, train.py]" in text and text.count("\n# ") >= 3
    r = server.cli("run", "job.yaml", "--follow", cwd=tmp_path)
    assert r.returncode == 0 and "trained from init" in r.stdout, r.stderr
    assert server.cli("init", cwd=tmp_path).returncode == 2  # never overwrites without --force
    (tmp_path / "requirements.txt").write_text("numpy\n")
    assert server.cli("init", "--force", cwd=tmp_path).returncode == 0
    assert "  requirements: requirements.txt" in (tmp_path / "job.yaml").read_text()
    assert server.cli("run", "--dry-run", "job.yaml", cwd=tmp_path).returncode == 0


def test_ls_filters_and_pages(server, tmp_path):
    ids = [server.cli("run", "--name", name, "--", "true").stdout.strip() for name in ("a", "b", "a", "c")]
    assert all(ids)

    def listed(*args):
        r = server.cli("ls", "-o", "json", *args)
        assert r.returncode == 0, r.stderr
        return [j["id"] for j in json.loads(r.stdout)], r.stderr

    assert listed("--name", "a")[0] == [ids[2], ids[0]]
    first, note = listed("--limit", "3")
    assert first == ids[:0:-1] and "more: add --after" in note
    cursor = note.split("--after ")[1].split()[0]
    assert listed("--after", cursor)[0] == [ids[0]]
    assert listed("--all")[0] == ids[::-1]
    assert listed("--since", "1h")[0] == ids[::-1]
    assert listed("--since", "2999-01-01")[0] == []
    assert listed("--queue", "nope")[0] == []
    r = server.cli("ls", "--since", "yesterday")
    assert r.returncode == 2 and "--since" in r.stderr
