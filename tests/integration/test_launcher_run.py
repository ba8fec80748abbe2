"""The launcher end to end, as a real process, against a recording report server."""

from __future__ import annotations

import json
import os
import subprocess

from psutil import pid_exists

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    ATTEMPT_ID, PYTHON, log_of, make_config, pid_alive, read_result, report_server, run_launcher, script,
    start_launcher,
)
from tests.support.waiting import until


def test_success_delivers_logs_metrics_and_result(tmp_path, report_server):
    cmd = script(tmp_path, "job.py", """
import os, sys, trainyard
for i in range(5):
    print(f"line {i} é")
    trainyard.log_metrics(step=i, loss=1.0 / (i + 1))
print("to stderr", file=sys.stderr)
print("env", os.environ["TRAINYARD_JOB_ID"], os.environ["TRAINYARD_ATTEMPT"], os.getcwd())
""")
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, cmd, token="s3cret")
    result = run_launcher(attempt)

    assert result == {"exit_code": 0, "reason": "Succeeded", "message": "", "outputs": []}
    log = (attempt / "output.log").read_bytes()
    assert b"line 4 \xc3\xa9\n" in log and b"to stderr\n" in log
    assert f"env job-1 1 {attempt / 'work'}".encode() in log
    assert report_server.log_bytes() == log
    lines = report_server.metric_lines()
    assert [json.loads(ln)["step"] for ln in lines] == [0, 1, 2, 3, 4]
    reports = report_server.snapshot()
    # a command this short is over before the first report is due: one report carries everything
    assert reports[0]["phase"] in ("running", "exited") and isinstance(reports[0]["pid"], int)
    assert reports[-1]["phase"] == "exited" and reports[-1]["result"] == result
    assert all(p == f"/internal/attempts/{ATTEMPT_ID}/replicas/0/report" for p in report_server.paths)
    assert all(h["Authorization"] == "Bearer s3cret" for h in report_server.headers)


def test_nonzero_exit_is_error(tmp_path, report_server):
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, [PYTHON, "-c", "import sys; sys.exit(3)"])
    result = run_launcher(attempt)
    assert result["exit_code"] == 3 and result["reason"] == "Error(exit 3)"
    assert report_server.final()["result"] == result


def test_cuda_visible_devices_is_exactly_the_given_gpus(tmp_path, report_server):
    show = [PYTHON, "-c", "import os; print(repr(os.environ['CUDA_VISIBLE_DEVICES']))"]
    make_config(tmp_path / "a", report_server.url, show, gpus=["1", "3"])
    make_config(tmp_path / "b", report_server.url, show)
    run_launcher(tmp_path / "a")
    run_launcher(tmp_path / "b")
    assert (tmp_path / "a" / "output.log").read_text() == "'1,3'\n"
    assert (tmp_path / "b" / "output.log").read_text() == "''\n"


def test_timeout_stops_the_command(tmp_path, report_server):
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, ["sleep", "30"], timeout=0.5, grace_period=0.5)
    result = run_launcher(attempt, timeout=20)  # well before the command would end by itself
    assert result["reason"] == "Timeout" and result["exit_code"] == -15


def test_memory_limit_kills_the_tree_only(tmp_path, report_server):
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        hog = script(tmp_path, "hog.py", """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; b = b'x' * (300 << 20); time.sleep(30)"])
time.sleep(30)
""")
        attempt = tmp_path / "attempt"
        make_config(attempt, report_server.url, hog, memory_limit=100 << 20)
        result = run_launcher(attempt, timeout=25)  # before the hog's 30 s sleep could end it
        assert result["reason"] == "OOMKilled" and result["exit_code"] == -9
        assert "limit" in result["message"]
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_outputs_uploaded_with_digests(tmp_path, report_server):
    import hashlib

    cmd = script(tmp_path, "job.py", """
import os, pathlib
out = pathlib.Path(os.environ["TRAINYARD_OUTPUT_DIR"])
(out / "model").mkdir()
(out / "model" / "w.bin").write_bytes(b"weights")
pathlib.Path("report.txt").write_text("done")
pathlib.Path("scratch.txt").write_text("not uploaded")
""")
    attempt, store = tmp_path / "attempt", tmp_path / "store"
    make_config(attempt, report_server.url, cmd, outputs=["*.txt", "report.*"], output_url=f"file://{store}")
    result = run_launcher(attempt)
    digest = "sha256:" + hashlib.sha256(b"weights").hexdigest()
    assert {"path": "model/w.bin", "size": 7, "digest": digest} in result["outputs"]
    assert sorted(o["path"] for o in result["outputs"]) == ["model/w.bin", "report.txt", "scratch.txt"]
    assert (store / "model" / "w.bin").read_bytes() == b"weights"
    assert (store / "report.txt").read_text() == "done"


def test_snapshot_is_the_work_dir(tmp_path, report_server):
    import tarfile

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('from snapshot')\n")
    with tarfile.open(tmp_path / "code.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "code" / "train.py", arcname="train.py")
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, [PYTHON, "train.py"], snapshot=str(tmp_path / "code.tar.gz"))
    assert run_launcher(attempt)["reason"] == "Succeeded"
    assert (attempt / "output.log").read_text() == "from snapshot\n"


def test_inputs_are_passed_as_paths(tmp_path, report_server):
    data = tmp_path / "data.csv"
    data.write_text("1,2\n")
    attempt = tmp_path / "attempt"
    cmd = [PYTHON, "-c", "import os; print(open(os.environ['TRAINYARD_INPUT_TRAIN_DATA']).read(), end='')"]
    make_config(attempt, report_server.url, cmd, inputs={"train-data": f"file://{data}"})
    assert run_launcher(attempt)["reason"] == "Succeeded"
    assert (attempt / "output.log").read_text() == "1,2\n"


def test_missing_input_is_setup_failed(tmp_path, report_server):
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, ["true"], inputs={"weights": str(tmp_path / "nope.pt")})
    result = run_launcher(attempt)
    assert result["reason"] == "SetupFailed" and result["exit_code"] is None
    assert "weights" in result["message"]
    assert report_server.final()["result"] == result


def test_unknown_command_is_setup_failed(tmp_path, report_server):
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, ["no-such-command-xyz"])
    result = run_launcher(attempt)
    assert result["reason"] == "SetupFailed" and result["exit_code"] is None
    assert "no-such-command-xyz" in result["message"]


def test_daemonized_leftovers_are_killed_after_exit(tmp_path, report_server):
    pids = tmp_path / "pids"
    cmd = script(tmp_path, "job.py", f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open({str(pids)!r} + ".tmp", "w").write(str(os.getpid()))
        os.rename({str(pids)!r} + ".tmp", {str(pids)!r})
        time.sleep(60)
    os._exit(0)
while not os.path.exists({str(pids)!r}):
    time.sleep(0.01)
""")
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, cmd)
    result = run_launcher(attempt)
    assert result["reason"] == "Succeeded"
    assert not pid_alive(int(pids.read_text()))


def test_launcher_survives_sigint_and_sighup_and_the_command_does_not_inherit_ignoring_them(tmp_path, report_server):
    flag = tmp_path / "flag"
    cmd = script(tmp_path, "job.py", f"""
import os, signal, time
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,
      signal.getsignal(signal.SIGHUP) == signal.SIG_DFL, flush=True)
while not os.path.exists({str(flag)!r}):
    time.sleep(0.02)
""")
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, cmd)
    proc = start_launcher(attempt)
    until(lambda: report_server.snapshot())
    for sig in (2, 1):  # SIGINT, SIGHUP, while the command waits for the flag
        os.kill(proc.pid, sig)
    flag.touch()
    proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert read_result(attempt)["reason"] == "Succeeded"
    assert (attempt / "output.log").read_text() == "True True\n"


def test_orphans_are_reaped_while_the_command_runs(tmp_path, report_server):
    orphans, flag = tmp_path / "orphans", tmp_path / "flag"
    cmd = script(tmp_path, "job.py", f"""
import os, time
for _ in range(3):  # daemons that exit once orphaned: reparented to the launcher, then its zombies
    if os.fork() == 0:
        parent = os.getpid()  # the grandchild waits until this one is gone
        if os.fork() == 0:
            while os.getppid() == parent:
                time.sleep(0.005)
            with open({str(orphans)!r}, "a") as f:
                f.write(f"{{os.getpid()}} {{os.getppid()}}\\n")
            os._exit(0)
        os._exit(0)
while not os.path.exists({str(flag)!r}):
    time.sleep(0.02)
""")
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, cmd)
    proc = start_launcher(attempt)
    until(lambda: orphans.exists() and len(orphans.read_text().splitlines()) == 3)
    adopted = [tuple(map(int, line.split())) for line in orphans.read_text().splitlines()]
    assert {ppid for _, ppid in adopted} == {proc.pid}  # the launcher adopted them (a subreaper)
    until(lambda: not any(pid_alive(pid) or pid_exists(pid) for pid, _ in adopted))  # and reaped them
    assert proc.poll() is None  # while the command still runs
    flag.touch()
    proc.communicate(timeout=20)
    assert read_result(attempt)["reason"] == "Succeeded"


def test_the_command_inherits_no_token(tmp_path, report_server, monkeypatch):
    monkeypatch.setenv("TRAINYARD_SERVER_TOKEN", "server-secret")
    monkeypatch.setenv("TRAINYARD_TOKEN", "user-secret")
    show = [PYTHON, "-c", "import os; print(sorted(k for k, v in os.environ.items() if 'secret' in v))"]
    make_config(tmp_path / "a", report_server.url, show, token="attempt-secret")

    run_launcher(tmp_path / "a")

    assert (tmp_path / "a" / "output.log").read_text() == "[]\n"
    assert {h["Authorization"] for h in report_server.headers} == {"Bearer attempt-secret"}


def test_an_attempt_takes_its_folders_from_those_its_predecessor_made(tmp_path, report_server):
    from trainyard.launch.emptydirs import POOL

    cache = tmp_path / "venvs"
    first = tmp_path / "first"
    make_config(first, report_server.url, ["true"], venv_cache=str(cache), checkpoint_dir=str(tmp_path / "ck" / "j1"))
    assert run_launcher(first)["reason"] == "Succeeded"
    made = {os.stat(cache / POOL / n).st_ino for n in os.listdir(cache / POOL)}
    assert len(made) == 4  # made once its attempt was reported, for the next one: 3 folders, 1 file

    second = tmp_path / "second"
    cmd = script(tmp_path, "job.py", "import os\nprint(sorted(os.listdir('.')), sorted(os.listdir(os.environ['TRAINYARD_OUTPUT_DIR'])),"
                                     " os.path.isdir(os.environ['TRAINYARD_CHECKPOINT_DIR']))\n")
    make_config(second, report_server.url, cmd, venv_cache=str(cache), checkpoint_dir=str(tmp_path / "ck" / "j2"))
    assert run_launcher(second)["reason"] == "Succeeded"
    taken = {os.stat(p).st_ino for p in (second / "work", second / "outputs", tmp_path / "ck" / "j2", second / "output.log")}
    assert taken == made
    assert b"[] [] True\n" in (second / "output.log").read_bytes()
